package workspace

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// openPlain opens a root of Plain workspaces: bare directories of the
// calling user, for tests (see Plain). None of OpenKind's checks apply:
// nothing is mounted, and nothing in them is isolated anyway.
func openPlain(root string) (*Dir, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, kiln.Wrap(kiln.Invalid, err, "workspace root %q", root)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, kiln.Wrap(kiln.Unsupported, err, "cannot create the workspace root %s", root)
	}
	return &Dir{root: root, kind: Plain}, nil
}

// plainUsage counts the bytes of a Plain workspace's files; it has no
// size of its own.
func plainUsage(p string) (used, size int64, err error) {
	err = filepath.WalkDir(p, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed while walking
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			used += fi.Size()
		}
		return nil
	})
	return used, 0, err
}
