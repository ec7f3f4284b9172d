package native

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// mountTree makes, readable by the sandbox's unprivileged user:
//
//	root/secret.txt          a host file above the mounted folder
//	root/escape -> /etc      a symlink out of the allowed root
//	root/proj/lib.py
//	root/proj/etc -> /etc, root/proj/shadow -> /etc/shadow, root/proj/up -> ../..
func mountTree(t *testing.T) (root string) {
	t.Helper()
	root, err := os.MkdirTemp("", "kiln-mount-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(root, "proj")
	must(t, os.Mkdir(proj, 0o755))
	must(t, os.WriteFile(filepath.Join(root, "secret.txt"), []byte("host secret\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(proj, "lib.py"), []byte("VALUE = 42\n"), 0o644))
	must(t, os.Symlink("/etc", filepath.Join(root, "escape")))
	must(t, os.Symlink("/etc", filepath.Join(proj, "etc")))
	must(t, os.Symlink("/etc/shadow", filepath.Join(proj, "shadow")))
	must(t, os.Symlink("../..", filepath.Join(proj, "up")))
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestResolveMount: only folders under an allowed root, reached without a
// symlink out of it, can be mounted.
func TestResolveMount(t *testing.T) {
	root := mountTree(t)
	roots := []string{root}
	real, err := ResolveMount(roots, filepath.Join(root, "proj"))
	if err != nil || real != filepath.Join(root, "proj") {
		t.Errorf("ResolveMount(proj) = %q, %v; want the folder itself", real, err)
	}
	for _, tt := range []struct {
		source string
		kind   kiln.Kind
	}{
		{filepath.Join(root, "escape"), kiln.Invalid},      // a symlink out of the root
		{filepath.Join(root, "proj/etc"), kiln.Invalid},    // one inside the folder
		{filepath.Join(root, "proj/up/etc"), kiln.Invalid}, // up and out
		{filepath.Join(root, "secret.txt"), kiln.Invalid},  // not a folder
		{"/etc", kiln.Forbidden},                           // not under the root
		{filepath.Join(root, "../x"), kiln.Forbidden},      // above it
		{root + "-sibling", kiln.Forbidden},                // a name that merely starts like it
		{"", kiln.Invalid},
	} {
		if got, err := ResolveMount(roots, tt.source); kiln.KindOf(err) != tt.kind {
			t.Errorf("ResolveMount(%q) = %q, %v; want a %s error", tt.source, got, err, tt.kind)
		}
	}
	// Without roots (the local CLI) a symlink is followed to its real path.
	if real, err := ResolveMount(nil, filepath.Join(root, "escape")); err != nil || real != "/etc" {
		t.Errorf("ResolveMount(nil, escape) = %q, %v; want /etc", real, err)
	}
}

// TestMountReadOnly: the sandbox reads the mounted folder, cannot write
// through it, and a symlink in it shows only what the sandbox already
// sees, never the host's files above the folder or in /etc.
func TestMountReadOnly(t *testing.T) {
	root := mountTree(t)
	proj := filepath.Join(root, "proj")
	for _, bad := range []Spec{
		{Mounts: []Mount{{Source: proj, Target: "/etc"}}},
		{Mounts: []Mount{{Source: proj, Target: "/project/../etc"}}},
		{Mounts: []Mount{{Source: filepath.Join(root, "escape")}}},
		{Mounts: []Mount{{Source: "proj"}}},
		{Mounts: []Mount{{Source: proj, Target: "/project"}, {Source: proj, Target: "/project/x"}}},
	} {
		if _, err := newBackend(t).Create(context.Background(), bad); kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("Create(%+v) = %v; want an Invalid error", bad.Mounts, err)
		}
	}
	sb := newSandbox(t, Spec{Mounts: []Mount{{Source: proj, Target: "/project"}, {Source: proj}}})
	if out, info := run(t, sb, "cat", "/project/lib.py", "/mnt/proj/lib.py"); info.Code != 0 || out != "VALUE = 42\nVALUE = 42\n" {
		t.Errorf("reading the mount: %q, exit %d; want lib.py twice", out, info.Code)
	}
	for _, script := range []string{
		"echo x > /project/new",
		"echo x >> /project/lib.py",
		"rm /project/lib.py",
		"mkdir /project/d",
		"touch /mnt/proj/new",
	} {
		if out, info := run(t, sb, "sh", "-c", script); info.Code == 0 {
			t.Errorf("%s: succeeded (%q); want the read-only mount to refuse", script, out)
		}
	}
	if _, err := os.Stat(filepath.Join(proj, "new")); err == nil {
		t.Errorf("a file was written through the mount onto the host")
	}
	if b, _ := os.ReadFile(filepath.Join(proj, "lib.py")); string(b) != "VALUE = 42\n" {
		t.Errorf("lib.py on the host is %q; want it unchanged", b)
	}
	for _, script := range []string{
		"cat /project/shadow",
		"cat /project/etc/shadow",
		"cat /project/up/secret.txt",
		"cat /project/../secret.txt",
		"cat /project/up/" + strings.TrimPrefix(root, "/") + "/secret.txt",
		"ls -a / /mnt | grep -F " + filepath.Base(root),
	} {
		if out, info := run(t, sb, "sh", "-c", script); info.Code == 0 || strings.Contains(out, "host secret") || strings.Contains(out, "root:") {
			t.Errorf("%s: exit %d, %q; want no host file through the mount", script, info.Code, out)
		}
	}
	out, _ := run(t, sb, "sh", "-c", "grep ' /project ' /proc/self/mountinfo")
	for _, opt := range []string{"ro", "nosuid", "nodev"} {
		if !strings.Contains(out, " "+opt+",") && !strings.Contains(out, ","+opt+",") && !strings.Contains(out, ","+opt+" ") && !strings.Contains(out, " "+opt+" ") {
			t.Errorf("the mount /project is not %s: %q", opt, out)
		}
	}
}
