package main

import (
	"context"
	"io"

	"github.com/kiln-dev/kiln/internal/doctor"
)

func doctorReport(ctx context.Context, w io.Writer) error { return doctor.Report(ctx, w) }
