package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Create makes workspace id of the Dir's kind: a directory under the root
// with a filesystem of the given size and (at least) number of inodes
// mounted on it, owned by root with mode 0700 until a sandbox takes it
// (native.Spec.HostDir gives it to the sandbox's user). It returns the
// path. An id that already has a directory or an image is a conflict,
// mounted or not.
func (d *Dir) Create(id string, bytes, inodes int64) (string, error) {
	if err := validID(id); err != nil {
		return "", err
	}
	if bytes <= 0 || inodes <= 0 {
		return "", kiln.Errorf(kiln.Invalid, "workspace %s needs a positive size and number of inodes, not %d bytes and %d inodes", id, bytes, inodes)
	}
	p := d.Path(id)
	if err := os.Mkdir(p, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", kiln.Errorf(kiln.Conflict, "workspace %s already exists", id)
		}
		return "", kiln.Wrap(kiln.Internal, err, "cannot create workspace %s", id)
	}
	var err error
	switch d.kind {
	case Plain:
		return p, nil
	case Disk:
		err = d.createDisk(id, p, bytes, inodes)
	default:
		opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", bytes, inodes)
		if err = unix.Mount("kiln-workspace", p, "tmpfs", mountFlags, opts); err != nil {
			err = kiln.Wrap(kiln.Internal, err, "cannot mount workspace %s", id)
		}
	}
	if err != nil {
		os.Remove(p)
		return "", err
	}
	return p, nil
}

// Exists says whether workspace id is mounted: its directory is a tmpfs
// or an ext4 other than the root's own filesystem.
func (d *Dir) Exists(id string) bool {
	if validID(id) != nil {
		return false
	}
	return d.mounted(d.Path(id))
}

func (d *Dir) mounted(p string) bool {
	if d.kind == Plain {
		fi, err := os.Lstat(p)
		return err == nil && fi.IsDir()
	}
	var root, st unix.Stat_t
	if unix.Lstat(d.root, &root) != nil || unix.Lstat(p, &st) != nil {
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Dev == root.Dev {
		return false
	}
	var sfs unix.Statfs_t
	return unix.Statfs(p, &sfs) == nil && (sfs.Type == unix.TMPFS_MAGIC || sfs.Type == unix.EXT4_SUPER_MAGIC)
}

// Restore makes sure that workspace id is mounted, and says whether it
// is: a disk workspace whose mount is gone (after a reboot, or a service
// that ran in a mount namespace of its own) is mounted again from its
// image. It answers NotFound for a workspace that is lost: a tmpfs after
// a reboot, or no workspace at all. Another error (the image cannot be
// mounted) leaves the image as it is.
func (d *Dir) Restore(id string) error {
	if err := validID(id); err != nil {
		return err
	}
	p := d.Path(id)
	if d.mounted(p) {
		return nil
	}
	if _, err := os.Lstat(d.imagePath(id)); errors.Is(err, fs.ErrNotExist) {
		return kiln.Errorf(kiln.NotFound, "workspace %s is lost: it is not mounted and has no disk image", id)
	}
	// A directory left by the lost mount is empty, unless something wrote
	// into it since; the mount goes on top either way.
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return kiln.Wrap(kiln.Internal, err, "cannot restore workspace %s", id)
	}
	err := waitUnused(d.imagePath(id))
	if err == nil {
		err = d.mountImage(id, p)
	}
	if err != nil {
		return kiln.Wrap(kiln.Internal, err, "cannot mount the image of workspace %s (%s)", id, d.imagePath(id))
	}
	return nil
}

// Remove unmounts workspace id and removes its directory and image; its
// files are gone. The unmount is lazy (MNT_DETACH): a sandbox that still
// has it bound keeps it until that sandbox ends, and the memory (or the
// disk blocks and loop device) is freed then. Removing a workspace that
// is not there is not an error.
func (d *Dir) Remove(id string) error {
	if err := validID(id); err != nil {
		return err
	}
	p := d.Path(id)
	// More than one mount may be stacked there (a Create raced by hand, a
	// mount made by an operator); take them all off.
	for i := 0; d.kind != Plain && d.mounted(p); i++ {
		if i == 16 {
			return kiln.Errorf(kiln.Internal, "workspace %s stays mounted after %d unmounts", id, i)
		}
		if err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			return kiln.Wrap(kiln.Internal, err, "cannot unmount workspace %s", id)
		}
	}
	err := os.Remove(p)
	if errors.Is(err, unix.ENOTEMPTY) {
		// A directory that lost its mount and then got files. RemoveAll
		// does not follow symlinks.
		err = os.RemoveAll(p)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return kiln.Wrap(kiln.Internal, err, "cannot remove workspace %s", id)
	}
	// Unlinked while a sandbox may still use it: the loop device keeps
	// the file open, and its blocks go with the last user.
	if err := os.Remove(d.imagePath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return kiln.Wrap(kiln.Internal, err, "cannot remove the image of workspace %s", id)
	}
	return nil
}

// Usage returns the bytes used in workspace id and its size.
func (d *Dir) Usage(id string) (used, size int64, err error) {
	if err := validID(id); err != nil {
		return 0, 0, err
	}
	p := d.Path(id)
	// statfs on a directory without its mount would describe the root's
	// filesystem instead.
	if !d.mounted(p) {
		return 0, 0, kiln.Errorf(kiln.NotFound, "workspace %s is not mounted", id)
	}
	if d.kind == Plain {
		return plainUsage(p)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return 0, 0, kiln.Wrap(kiln.Internal, err, "cannot read the usage of workspace %s", id)
	}
	size = int64(st.Blocks) * st.Bsize
	used = int64(st.Blocks-st.Bfree) * st.Bsize
	return used, size, nil
}
