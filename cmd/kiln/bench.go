package main

import (
	"context"
	"fmt"
	"io"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return fmt.Errorf("bench: not yet")
}
