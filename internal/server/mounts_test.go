package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// mountRoot makes an allowed root, readable by sandboxes, holding
// proj/lib.py and escape -> /etc.
func mountRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "kiln-mount-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	for _, err := range []error{
		os.Chmod(root, 0o755),
		os.Mkdir(filepath.Join(root, "proj"), 0o755),
		os.WriteFile(filepath.Join(root, "proj/lib.py"), []byte("VALUE = 42\n"), 0o644),
		os.Symlink("/etc", filepath.Join(root, "escape")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestSessionMountsNeedAnAllowedRoot: a session may mount only folders
// under the administrator's roots, never through a symlink out of them,
// and none at all when no root is allowed; admins too.
func TestSessionMountsNeedAnAllowedRoot(t *testing.T) {
	root := mountRoot(t)
	ctx := ctxT(t)
	none := newEnv(t, options{})
	_, err := none.user("ada").CreateSession(ctx, client.SessionRequest{Mounts: []client.Mount{{Source: filepath.Join(root, "proj")}}})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 403 || !strings.Contains(p.Detail, "--mount-root") {
		t.Errorf("a mount on a server without roots: %v; want a 403 that says how an administrator allows folders", err)
	}
	e := newEnv(t, options{svc: service.Config{MountRoots: []string{root}}})
	ada := e.user("ada")
	for _, tt := range []struct {
		source string
		status int
	}{
		{"/etc", 403},
		{filepath.Join(root, "../"), 403},
		{filepath.Join(root, "escape"), 400},
		{"proj", 400},
	} {
		for _, c := range []*client.Client{ada, e.admin} {
			_, err := c.CreateSession(ctx, client.SessionRequest{Mounts: []client.Mount{{Source: tt.source}}})
			if !errors.As(err, &p) || p.Status != tt.status {
				t.Errorf("mount %q: %v; want %d", tt.source, err, tt.status)
			}
		}
	}
}

// TestSessionMountReadOnly: a session's code imports the mounted project
// and cannot write into it.
func TestSessionMountReadOnly(t *testing.T) {
	root := mountRoot(t)
	e := newEnv(t, options{svc: service.Config{MountRoots: []string{root}}, sandboxed: true})
	ctx := ctxT(t)
	c := e.user("ada")
	s, err := c.CreateSession(ctx, client.SessionRequest{Mounts: []client.Mount{{Source: filepath.Join(root, "proj"), Target: "/project"}}})
	if err != nil {
		t.Fatal(err)
	}
	code := "import sys\nsys.path.insert(0, '/project')\nimport lib\nprint(lib.VALUE)\n" +
		"try:\n    open('/project/new.txt', 'w')\nexcept OSError as e:\n    print('refused', e.errno)\n"
	x, err := c.Exec(ctx, s.ID, client.ExecRequest{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if r := x.Result; r == nil || r.Stdout != "42\nrefused 30\n" {
		t.Errorf("a cell on the mount: %+v; want 42 and a write refused with EROFS (30)", x.Result)
	}
	if _, err := os.Stat(filepath.Join(root, "proj/new.txt")); err == nil {
		t.Errorf("a file was written through the mount")
	}
}
