package doctor

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// The report says whether the Kubernetes backend can be used: in a
// build without it, that it is not in the build; with it, whether the
// cluster answers.
func TestReportKubernetes(t *testing.T) {
	var out bytes.Buffer
	Report(context.Background(), &out)
	s := out.String()
	i := strings.Index(s, "The Kubernetes backend (kiln serve --backend kubernetes):\n")
	if i < 0 {
		t.Fatalf("no Kubernetes section:\n%s", s)
	}
	line, _, _ := strings.Cut(s[i:], "\n\n")
	if !strings.Contains(line, "  ok       cluster ") && !strings.Contains(line, "  absent   ") && !strings.Contains(line, "  MISSING  cluster ") {
		t.Errorf("the Kubernetes section says neither ok, absent nor missing:\n%s", line)
	}
	// CI runs this with -tags kubernetes and KUBECONFIG on its test cluster.
	if os.Getenv("KUBECONFIG") != "" && !strings.Contains(line, "not in this build") && !strings.Contains(line, "  ok       cluster ") {
		t.Errorf("with KUBECONFIG=%s the cluster is not reported reachable:\n%s", os.Getenv("KUBECONFIG"), line)
	}
}
