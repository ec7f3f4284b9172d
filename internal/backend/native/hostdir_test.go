package native

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// newWorkspace makes a host workspace as the service does (a tmpfs of the
// given size under a workspace.Dir) and removes it when the test ends.
func newWorkspace(t *testing.T, bytes int64) (*workspace.Dir, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: workspaces are mounted and sandboxes made")
	}
	base := t.TempDir()
	// t.TempDir is 0700 at two levels; a sandbox's PID 1, an unprivileged
	// host uid, must be able to reach its workspace as in a real data dir.
	for _, p := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.Open(filepath.Join(base, "workspaces"))
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	dir, err := ws.Create(id, bytes, 1024)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ws.Remove(id); err != nil {
			t.Error(err)
		}
	})
	return ws, id, dir
}

// holdSlot keeps slot n busy until the test ends, so that the next sandbox
// gets another host uid range.
func holdSlot(t *testing.T, b *Backend, n int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(b.cfg.RuntimeDir, "slots", strconv.Itoa(n)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("hold slot %d: %v", n, err)
	}
}

// nextSandbox destroys sb and creates another sandbox on the same host
// directory in another slot, as a session resumed after a restart would be.
func nextSandbox(t *testing.T, b *Backend, sb *Sandbox, dir string) *Sandbox {
	t.Helper()
	ctx := context.Background()
	n := sb.slot.n
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	holdSlot(t, b, n)
	next, err := b.Create(ctx, Spec{HostDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Destroy(ctx) })
	if next.HostUID == sb.HostUID {
		t.Fatalf("the second sandbox has the first one's host uid %d", sb.HostUID)
	}
	return next
}

// owner is a file's owner and mode as the host sees them, symlinks not followed.
type owner struct {
	uid, gid uint32
	mode     fs.FileMode
}

func ownerOf(t *testing.T, p string) owner {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return owner{st.Uid, st.Gid, fi.Mode()}
}

// TestHostDirOutlivesSandbox: files that user code writes in a host
// workspace are there after its sandbox is gone, and the session's next
// sandbox, with other host uids, can use them as its own.
func TestHostDirOutlivesSandbox(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	ws, id, dir := newWorkspace(t, 4*kiln.MiB)
	sb1, err := b.Create(ctx, Spec{HostDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb1.Destroy(ctx) })
	script := "echo one > kept.txt && mkdir -p d/e && echo two > d/e/f && ln -s kept.txt link && mkfifo pipe && stat -c %U . && id -u"
	if out, info := run(t, sb1, "/bin/sh", "-c", script); out != "user\n1000\n" || info.Code != 0 {
		t.Fatalf("first sandbox: %q exit %d", out, info.Code)
	}
	if err := sb1.Destroy(ctx); err != nil {
		t.Fatal(err)
	}

	// A restarted service cleans up after its earlier sandboxes; the
	// workspaces are not among their leftovers.
	if _, err := New(Config{}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	if !ws.Exists(id) {
		t.Fatal("the workspace's mount is gone after its sandbox and a cleanup")
	}
	if data, err := os.ReadFile(filepath.Join(dir, "kept.txt")); string(data) != "one\n" {
		t.Fatalf("kept.txt on the host = %q, %v", data, err)
	}

	sb2 := nextSandbox(t, b, sb1, dir)
	user := sb2.HostUID + UserUID
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			t.Error(err)
			return nil
		}
		if o := ownerOf(t, p); o.uid != user || o.gid != user {
			t.Errorf("%s belongs to %d:%d, want the new sandbox's user %d", p, o.uid, o.gid, user)
		}
		return nil
	})
	// Programs are built and run in the workspace, so it must allow exec.
	script = "cat kept.txt d/e/f && echo more >> kept.txt && rm d/e/f && rmdir d/e && echo new > new.txt && rm link pipe && cp /usr/bin/true t && ./t && rm t && ls"
	if out, info := run(t, sb2, "/bin/sh", "-c", script); out != "one\ntwo\nd\nkept.txt\nnew.txt\n" || info.Code != 0 {
		t.Errorf("second sandbox: %q exit %d", out, info.Code)
	}
	if data, err := sb2.Agent.ReadFile(ctx, "kept.txt", 100); string(data) != "one\nmore\n" {
		t.Errorf("kept.txt through the agent = %q, %v", data, err)
	}
}

// TestHostDirChownIgnoresSymlinks: user code plants symlinks to host files
// and directories in its workspace; the next sandbox's Create changes the
// links, never their targets.
func TestHostDirChownIgnoresSymlinks(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	_, _, dir := newWorkspace(t, 4*kiln.MiB)
	// The targets are the test's own: were the walk to follow links, a
	// failing run would not change the host's real files.
	canaryDir := t.TempDir()
	canary := filepath.Join(canaryDir, "canary")
	if err := os.WriteFile(canary, []byte("host"), 0o640); err != nil {
		t.Fatal(err)
	}
	targets := []string{canary, canaryDir}
	before := map[string]owner{}
	for _, p := range targets {
		before[p] = ownerOf(t, p)
	}

	sb1, err := b.Create(ctx, Spec{HostDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb1.Destroy(ctx) })
	plant := "ln -s " + canary + " file && ln -s " + canaryDir + " dir && mkdir sub && ln -s " + canaryDir + " sub/dir && ln -s ../file sub/up"
	if out, info := run(t, sb1, "/bin/sh", "-c", plant); info.Code != 0 {
		t.Fatalf("planting symlinks: %q", out)
	}
	sb2 := nextSandbox(t, b, sb1, dir)

	for _, p := range targets {
		if got := ownerOf(t, p); got != before[p] {
			t.Errorf("%s changed from %+v to %+v", p, before[p], got)
		}
	}
	user := sb2.HostUID + UserUID
	for _, l := range []string{"file", "dir", "sub/dir", "sub/up"} {
		if o := ownerOf(t, filepath.Join(dir, l)); o.uid != user || o.mode&fs.ModeSymlink == 0 {
			t.Errorf("link %s: %+v, want a symlink owned by %d", l, o, user)
		}
	}
}

// TestHostDirSizeLimit: the host tmpfs's size is the workspace's limit.
func TestHostDirSizeLimit(t *testing.T) {
	_, _, dir := newWorkspace(t, 2*kiln.MiB)
	sb := newSandbox(t, Spec{HostDir: dir})
	out, info := run(t, sb, "/bin/sh", "-c", "head -c 3145728 /dev/zero > big")
	if info.Code == 0 || !strings.Contains(out, "No space left on device") {
		t.Errorf("writing 3 MiB into 2 MiB: %q exit %d, want no space left", out, info.Code)
	}
}

func TestHostDirRefused(t *testing.T) {
	b := newBackend(t)
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o755)
	link := filepath.Join(base, "link")
	os.Symlink(real, link)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct{ dir, why string }{
		{link, "is a symlink"},
		{file, "is not a directory"},
		{"relative/dir", "not an absolute path"},
		{filepath.Join(base, "missing"), "cannot be used"},
	} {
		_, err := b.Create(context.Background(), Spec{HostDir: tc.dir})
		if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("Create with HostDir %s = %v, want invalid: %s", tc.dir, err, tc.why)
		}
	}
	if o := ownerOf(t, real); o.uid != 0 {
		t.Errorf("the symlink's target was given to uid %d", o.uid)
	}
}

// TestChownTreeDeep: a tree nested far deeper than the open-files limit
// is walked with a few descriptors, and a second walk over a tree that is
// already right changes nothing (not even ctime).
func TestChownTreeDeep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown")
	}
	const depth, uid = 1000, 1_234_567
	top := t.TempDir()
	fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < depth; i++ {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		sub, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = sub
	}
	if err := unix.Symlinkat("/etc/passwd", fd, "link"); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	var lim, low unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	low = lim
	low.Cur = 64
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	err = chownTree(top, uid, uid)
	unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, "link", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Uid != uid {
		t.Fatalf("the link %d levels down: uid %d, %v; want %d", depth, st.Uid, err, uid)
	}
	if err := unix.Fstat(fd, &st); err != nil || st.Uid != uid {
		t.Fatalf("the directory %d levels down: uid %d, %v; want %d", depth, st.Uid, err, uid)
	}

	ctime := st.Ctim
	time.Sleep(10 * time.Millisecond)
	if err := chownTree(top, uid, uid); err != nil {
		t.Fatal(err)
	}
	unix.Fstat(fd, &st)
	if st.Ctim != ctime {
		t.Error("a second walk changed a directory that already had the right owner")
	}

	if err := os.Symlink(top, top+".link"); err != nil {
		t.Fatal(err)
	}
	// O_NOFOLLOW|O_DIRECTORY fails on a symlink with ENOTDIR.
	if err := chownTree(top+".link", 0, 0); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("chownTree on a symlink = %v, want ENOTDIR", err)
	}
	if err := unix.Stat(top, &st); err != nil || st.Uid != uid {
		t.Errorf("chownTree on a symlink changed its target: uid %d, %v", st.Uid, err)
	}
}
