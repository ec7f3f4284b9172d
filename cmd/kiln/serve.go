package main

import (
	"context"
	"io"

	"github.com/kiln-dev/kiln/internal/kiln"
)

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return kiln.Errorf(kiln.Unsupported, "kiln serve is not built yet")
}
