package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/kiln"
)

const mib = 1 << 20

// waitNoLoops waits for the loop devices of img to clear themselves: the
// last reference to a mount is dropped a little after umount returns.
func waitNoLoops(t *testing.T, img string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(loopsOf(img)) > 0 {
		if time.Now().After(deadline) {
			t.Errorf("loop devices %v still hold %s", loopsOf(img), img)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// assertGone checks that nothing of workspace id is left: no mount, no
// directory, no image, no loop device.
func assertGone(t *testing.T, d *Dir, id string) {
	t.Helper()
	if line := mountAt(t, d.Path(id)); line != "" {
		t.Errorf("still mounted: %q", line)
	}
	for _, p := range []string{d.Path(id), d.imagePath(id)} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	waitNoLoops(t, d.imagePath(id))
}

func TestDiskCreateUsageRemove(t *testing.T) {
	d := newKindDir(t, Disk)
	const id = "d15c"
	const asked = 2 * mib
	p, err := d.Create(id, asked, 64)
	if err != nil {
		t.Fatal(err)
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
	if ents, _ := os.ReadDir(p); len(ents) != 0 {
		t.Errorf("new workspace is not empty: %v", ents)
	}
	line := mountAt(t, p)
	for _, want := range []string{" - ext4 /dev/loop", "nosuid", "nodev"} {
		if !strings.Contains(line, want) {
			t.Errorf("mountinfo of the workspace lacks %q: %q", want, line)
		}
	}
	if strings.Contains(line, "noexec") {
		t.Errorf("workspace is noexec, but programs are built and run there: %q", line)
	}
	if fi, err := os.Stat(d.imagePath(id)); err != nil || fi.Mode() != 0o600 {
		t.Errorf("image %s: %v, %v; want a file of mode 0600", d.imagePath(id), fi, err)
	}
	if devs := loopsOf(d.imagePath(id)); len(devs) != 1 {
		t.Errorf("loop devices of the image: %v, want one", devs)
	}

	used0, size, err := d.Usage(id)
	if err != nil {
		t.Fatal(err)
	}
	if size < asked || size > asked+asked/20+mib {
		t.Errorf("Usage size = %d, want about the %d asked for", size, asked)
	}
	if err := os.WriteFile(filepath.Join(p, "f"), make([]byte, 256*kib), 0o600); err != nil {
		t.Fatal(err)
	}
	unix.Sync()
	used, _, err := d.Usage(id)
	if err != nil {
		t.Fatal(err)
	}
	if used-used0 < 256*kib {
		t.Errorf("Usage used went from %d to %d after writing 256 KiB", used0, used)
	}
	if _, err := d.Create(id, asked, 64); kiln.KindOf(err) != kiln.Conflict {
		t.Errorf("Create of an existing workspace = %v, want a conflict", err)
	}
	if err := d.Remove(id); err != nil {
		t.Fatal(err)
	}
	if d.Exists(id) {
		t.Error("Exists = true after Remove")
	}
	assertGone(t, d, id)
	if err := d.Remove(id); err != nil {
		t.Errorf("Remove of a removed workspace = %v, want nil", err)
	}
}

// TestDiskSizeLimits: the user gets the bytes and inodes asked for, and
// writing past them fails with ENOSPC (which the agent reports as
// no_space).
func TestDiskSizeLimits(t *testing.T) {
	d := newKindDir(t, Disk)
	const asked, inodes = 1 * mib, 64
	p, err := d.Create("5123", asked, inodes)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "asked"), make([]byte, asked), 0o600); err != nil {
		t.Fatalf("writing the %d bytes asked for: %v", asked, err)
	}
	err = os.WriteFile(filepath.Join(p, "more"), make([]byte, asked), 0o600)
	if !errors.Is(err, unix.ENOSPC) {
		t.Errorf("writing twice the size = %v, want ENOSPC", err)
	}
	os.Remove(filepath.Join(p, "more"))
	os.Remove(filepath.Join(p, "asked"))
	made := 1 // the root directory is an inode the user has
	for ; ; made++ {
		if made == 2*inodes {
			t.Fatalf("created %d files in a workspace of %d inodes", made, inodes)
		}
		f, err := os.Create(filepath.Join(p, fmt.Sprint("f", made)))
		if err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Errorf("file %d beyond the inode limit: %v, want ENOSPC", made, err)
			}
			break
		}
		f.Close()
	}
	if made < inodes {
		t.Errorf("ENOSPC after %d inodes, want at least the %d asked for", made, inodes)
	}
}

// TestDiskLayout: across the range of limits, the image gives at least
// what was asked, not much more, and is sparse on the host.
func TestDiskLayout(t *testing.T) {
	d := newKindDir(t, Disk)
	for i, c := range []struct{ bytes, inodes int64 }{
		{1 * mib, 64},
		{15 * mib, 1000},
		{16 * mib, 1000},
		{kiln.DefaultLimits().WorkspaceBytes, kiln.DefaultLimits().Inodes},
		{1 * mib, 4 << 20},
		{3 * kiln.GiB, 100000},
	} {
		id := fmt.Sprintf("%x", i+1)
		p, err := d.Create(id, c.bytes, c.inodes)
		if err != nil {
			t.Errorf("%d bytes, %d inodes: %v", c.bytes, c.inodes, err)
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			t.Fatal(err)
		}
		free, files := int64(st.Bavail)*st.Bsize, int64(st.Ffree)
		t.Logf("%d bytes, %d inodes: %d bytes and %d inodes free", c.bytes, c.inodes, free, files)
		// ext4 rounds up per group of blocks, and many inodes need many
		// groups.
		if slack := c.bytes/50 + mib + c.inodes*2; free < c.bytes || free > c.bytes+slack {
			t.Errorf("%d bytes, %d inodes: %d bytes free, want at least that and at most %d more", c.bytes, c.inodes, free, slack)
		}
		if files < c.inodes-1 || files > c.inodes+c.inodes/50+256 { // the root is one of the inodes
			t.Errorf("%d bytes, %d inodes: %d inodes free, want at least that", c.bytes, c.inodes, files)
		}
		var img unix.Stat_t
		if err := unix.Stat(d.imagePath(id), &img); err != nil {
			t.Fatal(err)
		}
		if onDisk := img.Blocks * 512; onDisk > 8*mib+c.inodes*inodeSize/8 {
			t.Errorf("%d bytes, %d inodes: a new image takes %d bytes of the host's disk, want it sparse", c.bytes, c.inodes, onDisk)
		}
		if err := d.Remove(id); err != nil {
			t.Fatal(err)
		}
	}
}

// unmountAll takes workspace id's mount away as a reboot does, and waits
// for its loop device to go.
func unmountAll(t *testing.T, d *Dir, id string) {
	t.Helper()
	if err := unix.Unmount(d.Path(id), 0); err != nil {
		t.Fatal(err)
	}
	waitNoLoops(t, d.imagePath(id))
}

// TestDiskRestore: a disk workspace whose mount went (a reboot) comes back
// with its files through Restore; a tmpfs one is lost and says so.
func TestDiskRestore(t *testing.T) {
	d := newKindDir(t, Disk)
	const id = "7e57"
	p, err := d.Create(id, 4*mib, 64)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("kiln"), 300_000) // 1.2 MB
	if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "sub", "data"), data, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(p, "sub", "data"), 1234, 1234); err != nil {
		t.Fatal(err)
	}
	if err := d.Restore(id); err != nil {
		t.Errorf("Restore of a mounted workspace = %v, want nil", err)
	}

	unmountAll(t, d, id)
	if d.Exists(id) {
		t.Fatal("Exists = true after the unmount")
	}
	if ids, _ := d.List(); !slices.Contains(ids, id) {
		t.Errorf("List = %v, want it to have %s", ids, id)
	}
	if err := d.Restore(id); err != nil {
		t.Fatal(err)
	}
	if !d.Exists(id) {
		t.Fatal("Exists = false after Restore")
	}
	got, err := os.ReadFile(filepath.Join(p, "sub", "data"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after Restore: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	if fi, err := os.Stat(filepath.Join(p, "sub", "data")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1234 || fi.Mode() != 0o640 {
		t.Errorf("after Restore: %v, %v; want owner 1234 and mode 0640", fi, err)
	}
	if devs := loopsOf(d.imagePath(id)); len(devs) != 1 {
		t.Errorf("loop devices after Restore: %v, want one", devs)
	}

	// The directory too may be gone; the image is enough.
	unmountAll(t, d, id)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := d.Restore(id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p, "sub", "data")); err != nil {
		t.Errorf("after Restore without the directory: %v", err)
	}

	if err := d.Remove(id); err != nil {
		t.Fatal(err)
	}
	assertGone(t, d, id)
	if err := d.Restore(id); kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("Restore of a removed workspace = %v, want not found", err)
	}
	if err := d.Restore("../x"); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("Restore of a bad id = %v, want invalid", err)
	}
}

// TestTmpfsRestore: a tmpfs workspace that lost its mount is lost.
func TestTmpfsRestore(t *testing.T) {
	d := newDir(t)
	if _, err := d.Create("7f", 64*kib, 16); err != nil {
		t.Fatal(err)
	}
	if err := d.Restore("7f"); err != nil {
		t.Errorf("Restore of a mounted tmpfs = %v, want nil", err)
	}
	if err := unix.Unmount(d.Path("7f"), 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Restore("7f"); kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("Restore of a tmpfs without its mount = %v, want not found", err)
	}
}

// TestDiskRemoveWhileBound: Remove while a sandbox still has the
// workspace bound (as a sandbox's mount namespace does) takes the image's
// name at once, and the loop device goes with the last bind.
func TestDiskRemoveWhileBound(t *testing.T) {
	d := newKindDir(t, Disk)
	const id = "b0d"
	p, err := d.Create(id, 2*mib, 64)
	if err != nil {
		t.Fatal(err)
	}
	bind := filepath.Join(filepath.Dir(d.Root()), "bind")
	if err := os.Mkdir(bind, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(p, bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(id); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bind, "still"), []byte("x"), 0o600); err != nil {
		t.Errorf("the bind lost its filesystem when the workspace was removed: %v", err)
	}
	if len(loopsOf(d.imagePath(id))) != 1 {
		t.Errorf("the loop device went while the bind used it")
	}
	if err := unix.Unmount(bind, 0); err != nil {
		t.Fatal(err)
	}
	assertGone(t, d, id)
}

// TestListImages: an image without its directory (after a reboot that
// also lost the directory) is a workspace to List; other files are not.
func TestListImages(t *testing.T) {
	d := newKindDir(t, Disk)
	for _, name := range []string{"abc.img", "notes.img", "ABC.img", "abd"} {
		if err := os.WriteFile(filepath.Join(d.Root(), name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(d.Root(), "dir.img"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(d.Path("abc"), 0o700); err != nil {
		t.Fatal(err)
	}
	ids, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"abc"}; !slices.Equal(ids, want) {
		t.Errorf("List = %v, want %v", ids, want)
	}
	for _, name := range []string{"notes.img", "ABC.img", "abd", "dir.img"} {
		os.Remove(filepath.Join(d.Root(), name))
	}
}

func TestKinds(t *testing.T) {
	for _, s := range []string{"disk", "tmpfs"} {
		if k, err := ParseKind(s); err != nil || string(k) != s {
			t.Errorf("ParseKind(%q) = %q, %v", s, k, err)
		}
	}
	for _, s := range []string{"", "Disk", "zfs", "ramfs"} {
		if _, err := ParseKind(s); kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), "disk, tmpfs") {
			t.Errorf("ParseKind(%q) = %v, want invalid naming the kinds", s, err)
		}
		if _, err := OpenKind(t.TempDir(), Kind(s)); kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("OpenKind(%q) = %v, want invalid", s, err)
		}
	}
}

// TestDiskRestoreBadImage: an image that does not mount is an error other
// than NotFound (the service then refuses to start rather than end the
// session), and the image stays for the operator.
func TestDiskRestoreBadImage(t *testing.T) {
	d := newKindDir(t, Disk)
	if err := os.WriteFile(d.imagePath("bad"), bytes.Repeat([]byte{0xff}, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	err := d.Restore("bad")
	if err == nil || kiln.KindOf(err) == kiln.NotFound || !strings.Contains(err.Error(), d.imagePath("bad")) {
		t.Errorf("Restore of a broken image = %v, want an error naming the image", err)
	}
	if _, err := os.Stat(d.imagePath("bad")); err != nil {
		t.Errorf("the broken image is gone: %v", err)
	}
	waitNoLoops(t, d.imagePath("bad"))
}

// TestDiskRestoreRefusesImageInUse: an image still mounted through a loop
// device elsewhere (a sandbox's or an earlier run's mount namespace) is
// not mounted a second time, which would corrupt it.
func TestDiskRestoreRefusesImageInUse(t *testing.T) {
	d := newKindDir(t, Disk)
	defer func(w time.Duration) { busyWait = w }(busyWait)
	busyWait = 200 * time.Millisecond
	const id = "05ed"
	p, err := d.Create(id, 2*mib, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The other namespace's mount, as a bind elsewhere; then this one's
	// mount goes, as when the service's own namespace ended.
	other := filepath.Join(filepath.Dir(d.Root()), "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(p, other, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(other, unix.MNT_DETACH)
	if err := unix.Unmount(p, 0); err != nil {
		t.Fatal(err)
	}
	err = d.Restore(id)
	if err == nil || !strings.Contains(err.Error(), "still in use by /dev/loop") {
		t.Fatalf("Restore of an image mounted elsewhere = %v, want a refusal naming the loop device", err)
	}
	if d.Exists(id) {
		t.Error("the image was mounted a second time")
	}
	// Once the other mount is gone, Restore mounts it.
	if err := unix.Unmount(other, 0); err != nil {
		t.Fatal(err)
	}
	busyWait = 10 * time.Second
	if err := d.Restore(id); err != nil {
		t.Fatal(err)
	}
	if len(loopsOf(d.imagePath(id))) != 1 {
		t.Errorf("loop devices after Restore: %v, want one", loopsOf(d.imagePath(id)))
	}
}

// TestDiskCreateConcurrent: many disk workspaces made at once (a burst of
// new sessions) all get a loop device. The kernel hands the same free
// device to every caller that asks at once, and all but one lose it.
func TestDiskCreateConcurrent(t *testing.T) {
	d := newKindDir(t, Disk)
	const n = 48
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := d.Create(fmt.Sprintf("c%03d", i), 2*mib, 64)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for i := range n {
		id := fmt.Sprintf("c%03d", i)
		if err := d.Remove(id); err != nil {
			t.Error(err)
		}
		assertGone(t, d, id)
	}
}
