package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// rootMode lets everyone look up a name in the root but nobody but root
// list or change it. A sandbox's PID 1 runs as an unprivileged host uid
// (its slot's HostUID) and resolves <root>/<id> itself when it binds its
// workspace, so it needs search permission here and on every parent; it
// must not learn the other sessions' ids. Each workspace is 0700 and
// belongs to the sandbox that uses it.
const rootMode = 0o711

// Open is OpenKind for tmpfs workspaces, for callers that make none or
// want them in memory.
func Open(root string) (*Dir, error) { return OpenKind(root, Tmpfs) }

// OpenKind makes sure root exists as a directory that only host root can
// change and returns the manager of the workspaces under it, which makes
// new ones of the given kind. It refuses a root where a symlink or a
// directory that someone else can write to (the root or a parent) would
// let another user redirect the mounts, and disk workspaces on a host
// without mkfs.ext4 or loop devices.
func OpenKind(root string, kind Kind) (*Dir, error) {
	if kind == Plain {
		return openPlain(root)
	}
	if _, err := ParseKind(string(kind)); err != nil {
		return nil, err
	}
	if kind == Disk {
		if err := checkDiskSupport(); err != nil {
			return nil, err
		}
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, kiln.Wrap(kiln.Invalid, err, "workspace root %q", root)
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return nil, kiln.Wrap(kiln.Unsupported, err, "cannot create the parent of the workspace root %s", root)
	}
	if err := os.Mkdir(root, rootMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, kiln.Wrap(kiln.Unsupported, err, "cannot create the workspace root %s", root)
	}
	// Checked before the chmod: an existing root that others could write
	// to is refused rather than repaired, since someone may already have
	// planted entries in it.
	if err := checkChain(root); err != nil {
		return nil, kiln.Wrap(kiln.Unsupported, err, "unsafe workspace root %s: %v; the root and each of its parents must be a real directory owned by root, not writable by others (unless sticky, like /tmp), and searchable by others (e.g. mode 0755): choose another data directory or fix the modes", root, err)
	}
	// Mkdir's mode went through the umask, and an existing root may have
	// had any mode.
	if err := os.Chmod(root, rootMode); err != nil {
		return nil, kiln.Wrap(kiln.Unsupported, err, "cannot set the mode of the workspace root %s", root)
	}
	return &Dir{root: root, kind: kind}, nil
}

// checkChain checks root and each of its parents: a real directory (no
// symlink anywhere), owned by root, and not writable by a group or others
// (a parent may be if it is sticky, like /tmp: its root-owned child cannot
// be renamed or removed by anyone else). Every parent must also let others
// search it, or the sandboxes could not reach their workspaces.
func checkChain(root string) error {
	p := "/"
	parts := strings.Split(strings.TrimPrefix(root, "/"), "/")
	for i := -1; i < len(parts); i++ {
		if i >= 0 {
			p = filepath.Join(p, parts[i])
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symlink", p)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != 0 {
			return fmt.Errorf("%s is not owned by root", p)
		}
		last := i == len(parts)-1
		mode := fi.Mode()
		if mode.Perm()&0o022 != 0 && (last || mode&fs.ModeSticky == 0) {
			return fmt.Errorf("%s can be written by users other than root (mode %v)", p, mode)
		}
		if !last && mode.Perm()&0o001 == 0 {
			return fmt.Errorf("%s cannot be searched by the sandboxes' users (mode %v)", p, mode)
		}
	}
	return nil
}
