//go:build !kubernetes

package main

import (
	"strings"
	"testing"
)

// The default build has no Kubernetes backend (client-go stays out of
// every sandbox process): kiln serve --backend kubernetes says so, and
// how to build a kiln that has it, instead of starting.
func TestServeKubernetesNotInBuild(t *testing.T) {
	r := runCLI(t, "", "serve", "--backend", "kubernetes", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--pool", "0", "--run-pool", "0")
	if r.code == 0 || !strings.Contains(r.stderr, "built without the Kubernetes backend") || !strings.Contains(r.stderr, "-tags kubernetes") {
		t.Errorf("exit %d, stderr %q; want a refusal that says how to build kiln with the backend", r.code, r.stderr)
	}
}
