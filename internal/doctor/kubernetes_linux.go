//go:build kubernetes

package doctor

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/kiln-dev/kiln/internal/backend/kubernetes"
)

// kubernetesReport says whether the cluster of $KUBECONFIG (or, without
// it, the in-cluster configuration) answers and has a Ready node, for
// kiln serve --backend kubernetes. It does not change the verdict.
func kubernetesReport(ctx context.Context, w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The Kubernetes backend (kiln serve --backend kubernetes):")
	cfg := os.Getenv("KUBECONFIG")
	where := "the in-cluster configuration"
	if cfg != "" {
		where = "KUBECONFIG " + cfg
	}
	v, ready, err := kubernetes.Probe(ctx, cfg)
	switch {
	case err != nil:
		fmt.Fprintf(w, "  absent   cluster (%s): %v\n", where, err)
	case ready == 0:
		fmt.Fprintf(w, "  MISSING  cluster %s (%s) answers but has no Ready node\n", v, where)
	default:
		fmt.Fprintf(w, "  ok       cluster %s (%s): %d Ready node(s)\n", v, where, ready)
	}
}
