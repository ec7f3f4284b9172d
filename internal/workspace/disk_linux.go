package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// The layout of a disk workspace's ext4 image. It is fixed rather than
// left to mke2fs.conf, so that the space and inodes a user gets do not
// depend on the host's configuration.
const (
	blockSize      = 4096
	inodeSize      = 256 // 128 would lose nanosecond timestamps, which artifacts compare
	reservedInodes = 10  // ext4's inodes 1..10; lost+found (11) is removed
	maxGroupInodes = 8 * blockSize
	maxGroupBlocks = 8 * blockSize
	journalBlocks  = 1024     // 4 MiB, ext4's smallest journal
	journalFrom    = 16 << 20 // smaller workspaces go without a journal
)

// mountFlags are a workspace's mount flags, the same for both kinds:
// nosuid and nodev, but not noexec, since user programs are built in the
// workspace and run from it.
const mountFlags = unix.MS_NOSUID | unix.MS_NODEV

// diskOptions: errors make the workspace read-only rather than carry on;
// the inode tables of a fresh sparse image already read as zeros, so the
// kernel need not write them (which would allocate them on the host);
// discard gives the host back the blocks of files the user deletes.
const diskOptions = "errors=remount-ro,noinit_itable,discard"

// imagePath is where workspace id's image is.
func (d *Dir) imagePath(id string) string { return filepath.Join(d.root, id+imageSuffix) }

// layout is the size of the image of a workspace of the given bytes and
// inodes, and the mkfs.ext4 arguments that make it. The image holds, on
// top of the user's bytes, ext4's own: inode tables, bitmaps, group
// descriptors, backup superblocks, the journal and the clusters ext4
// keeps back for its metadata (2%, at most 4096 blocks), so that the user
// gets at least the bytes and inodes asked for (a little more where ext4
// rounds up).
func layout(bytes, inodes int64) (size int64, args []string) {
	n := inodes + reservedInodes
	base := ceil(bytes, blockSize) + ceil(n*inodeSize, blockSize) + 64
	journal := bytes >= journalFrom
	if journal {
		base += journalBlocks
	}
	base += min(ceil(base, 49), 4096)
	// A group holds at most maxGroupInodes inodes, so many inodes in a
	// small image need more, smaller groups than mke2fs would choose; a
	// margin keeps the rounding of inodes per group under the maximum.
	groups := max(ceil(n, maxGroupInodes-1024), ceil(base, maxGroupBlocks-1024))
	perGroupOverhead := 8 + ceil(groups*64, blockSize) // bitmaps, table rounding, descriptors, a backup superblock
	// Whole groups only: mke2fs drops a last group too small to be worth
	// its overhead, and its blocks with it.
	perGroup := (ceil(base, groups) + perGroupOverhead + 7) &^ 7
	args = []string{"-q", "-F", "-t", "ext4",
		"-b", strconv.Itoa(blockSize), "-I", strconv.Itoa(inodeSize),
		"-N", strconv.FormatInt(n, 10), "-g", strconv.FormatInt(perGroup, 10),
		"-m", "0", "-E", "root_owner=0:0,nodiscard,lazy_itable_init=1,lazy_journal_init=1"}
	if journal {
		args = append(args, "-J", "size="+strconv.Itoa(journalBlocks*blockSize>>20), "-O", "^resize_inode")
	} else {
		args = append(args, "-O", "^has_journal,^resize_inode")
	}
	return groups * perGroup * blockSize, args
}

func ceil(a, b int64) int64 { return (a + b - 1) / b }

// createDisk makes workspace id's image and mounts it on p, a new empty
// directory.
func (d *Dir) createDisk(id, p string, bytes, inodes int64) error {
	size, args := layout(bytes, inodes)
	if err := d.checkFree(id, size); err != nil {
		return err
	}
	img := d.imagePath(id)
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return kiln.Errorf(kiln.Conflict, "workspace %s already exists (its image %s is there)", id, img)
		}
		return kiln.Wrap(kiln.Internal, err, "cannot create the image of workspace %s", id)
	}
	err = f.Truncate(size) // sparse: the host's disk is taken as files are written
	f.Close()
	if err == nil {
		err = mkfs(img, args)
	}
	if err == nil {
		err = d.mountImage(id, p)
	}
	if err == nil {
		err = prepareRoot(p)
	}
	if err != nil {
		unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		os.Remove(img)
		return kiln.Wrap(kiln.Internal, err, "cannot make the disk image of workspace %s", id)
	}
	return nil
}

// checkFree refuses a workspace that the data directory's filesystem could
// not hold if it filled up. The images are sparse, so this does not stop
// many workspaces together from promising more than the disk has; the
// per-user workspace quota bounds that.
func (d *Dir) checkFree(id string, size int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(d.root, &st); err != nil {
		return kiln.Wrap(kiln.Internal, err, "cannot read the free space of %s", d.root)
	}
	if free := int64(st.Bavail) * st.Bsize; free < size {
		return kiln.Errorf(kiln.Unavailable, "workspace %s needs up to %s of disk and %s has %s free; free some space or ask for a smaller workspace",
			id, kiln.FormatBytes(size), d.root, kiln.FormatBytes(free))
	}
	return nil
}

// mkfs makes the filesystem; mke2fs's own message goes into the error.
func mkfs(img string, args []string) error {
	bin, err := findMkfs()
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, append(args, img)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", bin, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// findMkfs looks on PATH and then where Debian puts it, for a service
// started with a PATH that lacks the sbin directories.
func findMkfs() (string, error) {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", kiln.Errorf(kiln.Unsupported, "disk workspaces need mkfs.ext4, which was not found; install e2fsprogs or use tmpfs workspaces (kiln serve --workspaces tmpfs)")
}

// checkDiskSupport says what is missing for disk workspaces.
func checkDiskSupport() error {
	if _, err := findMkfs(); err != nil {
		return err
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return kiln.Errorf(kiln.Unsupported, "disk workspaces need loop devices, and /dev/loop-control is missing (modprobe loop, or use tmpfs workspaces: kiln serve --workspaces tmpfs)")
	}
	return nil
}

// prepareRoot makes a new image's root what a fresh tmpfs's is: empty,
// root's, mode 0700. The sandbox is given it later (native.Spec.HostDir).
func prepareRoot(p string) error {
	if err := os.Remove(filepath.Join(p, "lost+found")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Chmod(p, 0o700)
}

// busyWait is how long Restore waits for an image's loop device from an
// earlier mount to clear itself.
var busyWait = 10 * time.Second

// loopsOf names the loop devices whose backing file is img. Two mounts of
// one ext4 image through two loop devices would corrupt it, and the last
// one may be alive in a mount namespace this process does not see: that
// of a sandbox, or of an earlier run of kiln under systemd, still ending.
// It reads sysfs only: opening a device could end it early.
func loopsOf(img string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var devs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == img {
			devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return devs
}

// waitUnused waits up to busyWait for img to have no loop device.
func waitUnused(img string) error {
	deadline := time.Now().Add(busyWait)
	for {
		devs := loopsOf(img)
		if len(devs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the image is still in use by %s (mounted in another mount namespace, say a sandbox of an earlier run that is still ending); try again later", strings.Join(devs, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mountImage attaches workspace id's image to a free loop device and
// mounts it on p. The loop device clears itself (LO_FLAGS_AUTOCLEAR) when
// its last user goes: the mount here and any sandbox's bind of it, so
// Remove's lazy unmount leaves no loop device behind.
func (d *Dir) mountImage(id, p string) error {
	img, err := os.OpenFile(d.imagePath(id), os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer img.Close()
	loop, err := attachLoop(img)
	if err != nil {
		return err
	}
	defer loop.Close() // the mount holds the device from here
	if err := unix.Mount(loop.Name(), p, "ext4", mountFlags, diskOptions); err != nil {
		return fmt.Errorf("mount %s on %s: %w", loop.Name(), p, err)
	}
	return nil
}

// loopMu serialises this process's loop attachments: the kernel hands the
// same free device to every caller that asks at once, and all but one of
// them would lose it.
var loopMu sync.Mutex

// attachLoop binds img to a free loop device and returns it open. Another
// process may take the same free device first, or the device may still be
// held for a moment by its last user (EBUSY); then it asks again, with a
// short pause, for up to loopWait.
func attachLoop(img *os.File) (*os.File, error) {
	loopMu.Lock()
	defer loopMu.Unlock()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("disk workspaces need loop devices: %w", err)
	}
	defer ctl.Close()
	cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}}
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], img.Name())
	deadline := time.Now().Add(loopWait)
	for tries := 1; ; tries++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("configure %s: %w", dev.Name(), err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no free loop device after %d tries in %v: the last, %s, was busy", tries, loopWait, dev.Name())
		}
		time.Sleep(time.Duration(min(tries, 20)) * time.Millisecond)
	}
}

// loopWait bounds attachLoop's retries.
const loopWait = 5 * time.Second
