package main

import (
	"context"
	"io"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Placeholders until the remote commands exist.

func sessionCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return kiln.Errorf(kiln.Unsupported, "kiln session is not built yet")
}

func execCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return kiln.Errorf(kiln.Unsupported, "kiln exec is not built yet")
}

func filesCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return kiln.Errorf(kiln.Unsupported, "kiln files is not built yet")
}

func historyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return kiln.Errorf(kiln.Unsupported, "kiln history is not built yet")
}

func keyCmd(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	return kiln.Errorf(kiln.Unsupported, "kiln key is not built yet")
}
