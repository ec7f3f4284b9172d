//go:build linux

package security

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
)

// TestAgentFileOpsIgnoreSymlinks: the service's file operations go through
// the agent inside the workspace; symlinks user code plants there cannot
// lead them anywhere else, not even elsewhere in the sandbox.
func TestAgentFileOpsIgnoreSymlinks(t *testing.T) {
	s := env(t)
	sb := s.sandbox(t, native.Spec{})
	ctx := context.Background()
	_, stderr, info := execIn(t, sb, 5*time.Second, "/bin/sh", "-c", `
ln -s /etc/passwd passwd-link
ln -s / root-link
ln -s /tmp tmp-link
ln -s ../../../../etc etc-link
ln -s /proc/self/root proc-link
echo inside > /tmp/inside.txt`)
	if info.Code != 0 {
		t.Fatalf("planting symlinks failed: %s", stderr)
	}
	for _, p := range []string{"passwd-link", "root-link/etc/passwd", "tmp-link/inside.txt", "etc-link/passwd", "proc-link/etc/passwd"} {
		if data, err := sb.Agent.ReadFile(ctx, p, 1<<20); err == nil {
			t.Errorf("ReadFile(%q) followed a symlink out of the workspace and read %q", p, data)
		}
	}
	if entries, err := sb.Agent.List(ctx, "root-link"); err == nil {
		t.Errorf("List(root-link) followed a symlink out of the workspace: %d entries", len(entries))
	}
	if err := sb.Agent.WriteFile(ctx, "tmp-link/planted.txt", []byte("x"), 0); err == nil {
		t.Errorf("WriteFile(tmp-link/planted.txt) wrote through a symlink out of the workspace")
	}
	if err := sb.Agent.WriteFile(ctx, "passwd-link", []byte("x"), 0); err == nil {
		out, _, _ := execIn(t, sb, 5*time.Second, "/bin/cat", "/etc/passwd")
		if strings.HasPrefix(out, "x") {
			t.Errorf("WriteFile(passwd-link) wrote through a symlink into /etc/passwd")
		}
	}
	if err := sb.Agent.Delete(ctx, "tmp-link/inside.txt", false); err == nil {
		t.Errorf("Delete(tmp-link/inside.txt) removed a file out of the workspace")
	}
	out, _, _ := execIn(t, sb, 5*time.Second, "/bin/sh", "-c", "ls /tmp; cat /tmp/inside.txt")
	if out != "inside.txt\ninside\n" {
		t.Errorf("/tmp after the file operations: %q, want only inside.txt, unchanged", out)
	}
}

// TestAgentFileOpsOnFIFO: a FIFO planted by user code must not wedge the
// agent's file operations. Opening a FIFO blocks until its other end is
// opened, so an agent that opens before it checks the file's type hangs,
// and while it holds its file-operation lock every later file operation
// of the sandbox hangs with it.
func TestAgentFileOpsOnFIFO(t *testing.T) {
	env(t)
	const budget = 2 * time.Second
	for _, op := range []struct {
		name string
		do   func(ctx context.Context, sb *box) error
	}{
		{"ReadFile", func(ctx context.Context, sb *box) error {
			_, err := sb.Agent.ReadFile(ctx, "planted.fifo", 1<<20)
			return err
		}},
		{"List", func(ctx context.Context, sb *box) error {
			_, err := sb.Agent.List(ctx, "planted.fifo")
			return err
		}},
		{"WriteFile", func(ctx context.Context, sb *box) error {
			return sb.Agent.WriteFile(ctx, "planted.fifo", []byte("x"), 0)
		}},
	} {
		t.Run(op.name, func(t *testing.T) {
			s := env(t)
			sb := s.sandbox(t, native.Spec{})
			if _, stderr, info := execIn(t, sb, 5*time.Second, "/usr/bin/mkfifo", "/workspace/planted.fifo"); info.Code != 0 {
				t.Fatalf("mkfifo: %s", stderr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			start := time.Now()
			err := op.do(ctx, sb)
			cancel()
			if took := time.Since(start); took >= budget {
				t.Errorf("%s on a FIFO planted by user code hung: no answer from the agent within %v (%v)", op.name, budget, err)
			} else if err == nil {
				t.Errorf("%s on a FIFO succeeded; want an error saying it is not a regular file (or directory)", op.name)
			}
			ctx, cancel = context.WithTimeout(context.Background(), budget)
			defer cancel()
			if err := sb.Agent.WriteFile(ctx, "after.txt", []byte("fine"), 0); err != nil {
				t.Errorf("the next file operation of the sandbox failed: %v", err)
			}
		})
	}
}
