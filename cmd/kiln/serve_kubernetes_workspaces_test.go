package main

import (
	"io"
	"testing"

	"github.com/kiln-dev/kiln/internal/workspace"
)

// With --backend kubernetes a session's workspace is its Pod's emptyDir,
// so kiln serve keeps plain directories on its own host: nothing mounted,
// no root-owned data directory, and so a non-root kiln Pod
// (deploy/kubernetes; TestDeployKustomize runs one). Other backends keep
// the flag's kind.
func TestServeKubernetesPlainWorkspaces(t *testing.T) {
	for _, c := range []struct {
		args []string
		want workspace.Kind
	}{
		{[]string{"--backend", "kubernetes"}, workspace.Plain},
		{[]string{"--backend", "kubernetes", "--workspaces", "tmpfs"}, workspace.Plain},
		{nil, workspace.Disk},
		{[]string{"--workspaces", "tmpfs"}, workspace.Tmpfs},
	} {
		f, err := parseServe(append(c.args, "--data", t.TempDir()), io.Discard)
		if err != nil {
			t.Fatalf("parseServe %q: %v", c.args, err)
		}
		if f.svc.Workspaces != c.want {
			t.Errorf("kiln serve %q: workspaces %q; want %q", c.args, f.svc.Workspaces, c.want)
		}
	}
}
