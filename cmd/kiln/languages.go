package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kiln-dev/kiln/internal/lang"
)

// languagesCmd lists every language, whether its runtime is installed and
// its version. It fails when one is missing, so scripts can check a host.
func languagesCmd(ctx context.Context, stdout io.Writer) error {
	w := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "LANGUAGE\tKIND\tRUNTIME\tVERSION")
	missing := 0
	for _, info := range lang.Detect(ctx) {
		if !info.Found {
			missing++
			fmt.Fprintf(w, "%s\t%s\tmissing\t%s\n", info.Name, info.Kind, info.Problem)
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", info.Name, info.Kind, info.Binary, info.Version)
	}
	w.Flush()
	if missing > 0 {
		return exitError{1}
	}
	return nil
}
