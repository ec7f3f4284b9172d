package workspace

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/kiln"
)

const kib = 1 << 10

// newDir opens a workspace root in a fresh temporary directory and removes
// every workspace left in it when the test ends, before the directory
// itself goes.
func newDir(t *testing.T) *Dir { return newKindDir(t, Tmpfs) }

func newKindDir(t *testing.T, kind Kind) *Dir {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: workspaces are mounts")
	}
	d, err := OpenKind(filepath.Join(searchableTempDir(t), "workspaces"), kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := d.List()
		for _, id := range ids {
			if err := d.Remove(id); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return d
}

// searchableTempDir is t.TempDir with its two 0700 levels opened for
// search, as a real data directory's parents are.
func searchableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// mountAt returns the mountinfo line of the mount on path, or "".
func mountAt(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == path {
			return sc.Text()
		}
	}
	return ""
}

func TestCreateUsageRemove(t *testing.T) {
	d := newDir(t)
	const id = "0a1b2c"
	p, err := d.Create(id, 1024*kib, 64)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(d.Root(), id) || p != d.Path(id) {
		t.Errorf("Create returned %s, Path says %s, want both under %s", p, d.Path(id), d.Root())
	}
	if !d.Exists(id) {
		t.Error("Exists = false right after Create")
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode() != fs.ModeDir|0o700 || st.Uid != 0 || st.Gid != 0 {
		t.Errorf("new workspace: mode %v owner %d:%d, want drwx------ 0:0", fi.Mode(), st.Uid, st.Gid)
	}
	line := mountAt(t, p)
	for _, want := range []string{" - tmpfs kiln-workspace ", "nosuid", "nodev", "size=1024k", "nr_inodes=64"} {
		if !strings.Contains(line, want) {
			t.Errorf("mountinfo of the workspace lacks %q: %q", want, line)
		}
	}
	if strings.Contains(line, "noexec") {
		t.Errorf("workspace is noexec, but programs are built and run there: %q", line)
	}

	used0, size, err := d.Usage(id)
	if err != nil {
		t.Fatal(err)
	}
	if size != 1024*kib {
		t.Errorf("Usage size = %d, want %d", size, 1024*kib)
	}
	if err := os.WriteFile(filepath.Join(p, "f"), make([]byte, 256*kib), 0o600); err != nil {
		t.Fatal(err)
	}
	used, _, err := d.Usage(id)
	if err != nil {
		t.Fatal(err)
	}
	if used-used0 < 256*kib {
		t.Errorf("Usage used went from %d to %d after writing 256 KiB", used0, used)
	}

	if _, err := d.Create(id, 1024*kib, 64); kiln.KindOf(err) != kiln.Conflict {
		t.Errorf("Create of an existing workspace = %v, want a conflict", err)
	}

	if err := d.Remove(id); err != nil {
		t.Fatal(err)
	}
	if d.Exists(id) {
		t.Error("Exists = true after Remove")
	}
	if line := mountAt(t, p); line != "" {
		t.Errorf("still mounted after Remove: %q", line)
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory still there after Remove: %v", err)
	}
	if err := d.Remove(id); err != nil {
		t.Errorf("Remove of a removed workspace = %v, want nil", err)
	}
	if _, _, err := d.Usage(id); kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("Usage of a removed workspace = %v, want not found", err)
	}
}

func TestSizeLimits(t *testing.T) {
	d := newDir(t)
	p, err := d.Create("5123", 512*kib, 16)
	if err != nil {
		t.Fatal(err)
	}
	err = os.WriteFile(filepath.Join(p, "big"), make([]byte, 1024*kib), 0o600)
	if !errors.Is(err, unix.ENOSPC) {
		t.Errorf("writing 1 MiB into 512 KiB = %v, want ENOSPC", err)
	}
	os.Remove(filepath.Join(p, "big"))
	for i := 0; ; i++ {
		if i == 32 {
			t.Fatal("created 32 files in a workspace of 16 inodes")
		}
		f, err := os.Create(filepath.Join(p, "f"+strings.Repeat("x", i)))
		if err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Errorf("file %d beyond the inode limit: %v, want ENOSPC", i, err)
			}
			break
		}
		f.Close()
	}
}

func TestBadIDs(t *testing.T) {
	d := &Dir{root: t.TempDir()} // validation comes before any use of the root
	for _, id := range []string{"", "..", "a/b", "../etc", "ABC", strings.Repeat("0", 65)} {
		if _, err := d.Create(id, kib, 1); kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("Create(%q) = %v, want invalid", id, err)
		}
		if err := d.Remove(id); kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("Remove(%q) = %v, want invalid", id, err)
		}
		if _, _, err := d.Usage(id); kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("Usage(%q) = %v, want invalid", id, err)
		}
		if d.Exists(id) {
			t.Errorf("Exists(%q) = true", id)
		}
	}
	for _, n := range [][2]int64{{0, 1}, {kib, 0}, {-1, 1}} {
		if _, err := d.Create("ab", n[0], n[1]); kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("Create with %d bytes, %d inodes = %v, want invalid", n[0], n[1], err)
		}
	}
}

// TestListSeesLeftovers: after a reboot the directories are there without
// their mounts; List reports them so the service can remove them.
func TestListSeesLeftovers(t *testing.T) {
	d := newDir(t)
	for _, id := range []string{"aa", "bb"} {
		if _, err := d.Create(id, 64*kib, 16); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(d.Path("cafe"), 0o700); err != nil { // lost its mount
		t.Fatal(err)
	}
	if err := os.Mkdir(d.Path("lost+found"), 0o700); err != nil { // not kiln's
		t.Fatal(err)
	}
	if err := os.WriteFile(d.Path("dead"), nil, 0o600); err != nil { // not a directory
		t.Fatal(err)
	}
	ids, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if want := []string{"aa", "bb", "cafe"}; !slices.Equal(ids, want) {
		t.Errorf("List = %v, want %v", ids, want)
	}
	if d.Exists("cafe") {
		t.Error("Exists = true for a directory without its mount")
	}
	if _, _, err := d.Usage("cafe"); kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("Usage of an unmounted leftover = %v, want not found", err)
	}
	if _, err := d.Create("cafe", 64*kib, 16); kiln.KindOf(err) != kiln.Conflict {
		t.Errorf("Create over a leftover = %v, want a conflict", err)
	}
	if err := d.Remove("cafe"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(d.Path("cafe")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("leftover still there after Remove: %v", err)
	}
	os.Remove(d.Path("lost+found"))
	os.Remove(d.Path("dead"))
}

func TestOpen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the root must belong to root")
	}
	base := searchableTempDir(t) // under the sticky /tmp, which is allowed

	fresh := filepath.Join(base, "fresh")
	if _, err := Open(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fresh); err != nil || fi.Mode() != fs.ModeDir|0o711 {
		t.Errorf("new root: %v, %v; want drwx--x--x", fi.Mode(), err)
	}

	existing := filepath.Join(base, "existing")
	os.Mkdir(existing, 0o755)
	if _, err := Open(existing); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(existing); fi.Mode() != fs.ModeDir|0o711 {
		t.Errorf("existing 0755 root now %v, want drwx--x--x", fi.Mode())
	}

	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	link := filepath.Join(base, "link")
	os.Symlink(fresh, link)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	theirs := filepath.Join(base, "theirs")
	os.Mkdir(theirs, 0o755)
	os.Chown(theirs, 1234, 1234)
	closed := filepath.Join(base, "closed")
	os.Mkdir(closed, 0o700)
	for _, tc := range []struct{ root, why string }{
		{open, "can be written by users other than root"},
		{filepath.Join(open, "ws"), "can be written by users other than root"}, // not sticky
		{link, "is a symlink"},
		{filepath.Join(link, "ws"), "is a symlink"},
		{file, "is not a directory"},
		{theirs, "is not owned by root"},
		{filepath.Join(theirs, "ws"), "is not owned by root"},
		{filepath.Join(closed, "ws"), "cannot be searched"},
	} {
		// The message a user sees (kiln.Message, without the cause) says
		// what is unsafe and what is allowed.
		if _, err := Open(tc.root); err == nil || !strings.Contains(kiln.Message(err), tc.why) || !strings.Contains(kiln.Message(err), "owned by root") {
			t.Errorf("Open(%s) = %v, want a message saying %q and what is allowed", tc.root, err, tc.why)
		}
	}
}
