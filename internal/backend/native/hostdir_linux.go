package native

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// A workspace on the host (Spec.HostDir) outlives its sandbox: the next
// sandbox of the same session gets another slot, so another host uid
// range, and the files that the last one's user made belong to uids that
// the new sandbox does not map. Create therefore gives the whole tree to
// the new sandbox's user before the sandbox starts.

// checkHostDir accepts an absolute path to a directory that is not itself
// a symlink. The path's parents are the service's, and trusted.
func checkHostDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return kiln.Errorf(kiln.Invalid, "the workspace directory %q is not an absolute path", dir)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "the workspace directory %s cannot be used", dir)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return kiln.Errorf(kiln.Invalid, "the workspace directory %s is a symlink", dir)
	}
	if !fi.IsDir() {
		return kiln.Errorf(kiln.Invalid, "the workspace directory %s is not a directory", dir)
	}
	return nil
}

// chownTree gives dir and everything in it to uid:gid, never following a
// symlink: the tree was written by an earlier sandbox's user code, which
// may have planted symlinks to host files (say, /etc/shadow) for a
// careless chown -R to give away.
//
// No sandbox runs on the directory while this runs (the session's earlier
// sandbox is gone, the next one not started), so nothing should change
// under the walk. It still never resolves a name that could be a symlink:
// entries are changed with fchownat(AT_SYMLINK_NOFOLLOW), which acts on a
// link itself, and directories are entered by openat(O_NOFOLLOW|
// O_DIRECTORY) and then checked to be the directory that was lstat'ed.
//
// The walk holds one directory descriptor at a time and climbs back by
// "..", checked against the directory it came from, so a tree nested
// deeper than the open-files limit (inodes allow it) cannot exhaust the
// service's descriptors. It stays on dir's filesystem. Hard links need
// no care: link(2) does not cross mounts, and user code reaches this tree
// only through its own bind of dir, so a hard link it made here can only
// be to a file of the tree.
func chownTree(dir string, uid, gid int) error {
	fd, err := openDir(unix.AT_FDCWD, dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer func() { unix.Close(fd) }() // fd moves with the walk
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	dev := st.Dev
	if err := fchown(fd, &st, uid, gid); err != nil {
		return fmt.Errorf("chown %s: %w", dir, err)
	}
	names, err := readNames(fd)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}

	// path is for messages only; nothing is opened by it.
	type level struct {
		path     string
		dev, ino uint64
		names    []string // still to do
	}
	stack := []level{{path: dir, dev: st.Dev, ino: st.Ino, names: names}}
	for {
		cur := &stack[len(stack)-1]
		if len(cur.names) == 0 {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return nil
			}
			up, err := openDir(fd, "..")
			if err != nil {
				return fmt.Errorf("open %s/..: %w", cur.path, err)
			}
			unix.Close(fd)
			fd = up
			parent := stack[len(stack)-1]
			if err := unix.Fstat(fd, &st); err != nil || st.Dev != parent.dev || st.Ino != parent.ino {
				return fmt.Errorf("%s changed during the walk", parent.path)
			}
			continue
		}
		name := cur.names[len(cur.names)-1]
		cur.names = cur.names[:len(cur.names)-1]
		path := filepath.Join(cur.path, name)
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		if st.Dev != dev {
			continue // a mount inside the tree is not the sandbox's to own
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if st.Uid != uint32(uid) || st.Gid != uint32(gid) {
				if err := unix.Fchownat(fd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					return fmt.Errorf("chown %s: %w", path, err)
				}
			}
			continue
		}
		sub, err := openDir(fd, name)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		want := st
		if err := unix.Fstat(sub, &st); err != nil || st.Dev != want.Dev || st.Ino != want.Ino {
			unix.Close(sub)
			return fmt.Errorf("%s changed during the walk", path)
		}
		if err := fchown(sub, &st, uid, gid); err != nil {
			unix.Close(sub)
			return fmt.Errorf("chown %s: %w", path, err)
		}
		names, err := readNames(sub)
		if err != nil {
			unix.Close(sub)
			return fmt.Errorf("read %s: %w", path, err)
		}
		unix.Close(fd)
		fd = sub
		stack = append(stack, level{path: path, dev: st.Dev, ino: st.Ino, names: names})
	}
}

// openDir opens name (relative to dirfd) as a directory and fails on a
// symlink, whatever it points to.
func openDir(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// fchown changes the owner of fd unless st shows it already right, which
// makes a fresh, empty workspace cost one fstat.
func fchown(fd int, st *unix.Stat_t, uid, gid int) error {
	if st.Uid == uint32(uid) && st.Gid == uint32(gid) {
		return nil
	}
	return unix.Fchown(fd, uid, gid)
}

// readNames returns the names in the directory fd, without "." and "..".
func readNames(fd int) ([]string, error) {
	buf := make([]byte, 32<<10)
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
