//go:build !kubernetes || !linux

package doctor

import (
	"context"
	"fmt"
	"io"
)

// kubernetesReport: a kiln built without -tags kubernetes has no
// Kubernetes backend (it leaves client-go out), so there is nothing to
// check but to say so.
func kubernetesReport(_ context.Context, w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The Kubernetes backend (kiln serve --backend kubernetes):")
	fmt.Fprintln(w, "  absent   not in this build of kiln (go build -tags kubernetes ./cmd/kiln, on Linux)")
}
