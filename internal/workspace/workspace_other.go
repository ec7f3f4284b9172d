//go:build !linux

package workspace

import (
	"runtime"

	"github.com/kiln-dev/kiln/internal/kiln"
)

func unsupported() error {
	return kiln.Errorf(kiln.Unsupported, "workspaces need Linux, not %s", runtime.GOOS)
}

// Open fails: workspaces are Linux mounts.
func Open(root string) (*Dir, error) { return nil, unsupported() }

// OpenKind fails: workspaces are Linux mounts.
func OpenKind(root string, kind Kind) (*Dir, error) { return nil, unsupported() }

func (d *Dir) Create(id string, bytes, inodes int64) (string, error) { return "", unsupported() }
func (d *Dir) Exists(id string) bool                                 { return false }
func (d *Dir) Restore(id string) error                               { return unsupported() }
func (d *Dir) Remove(id string) error                                { return unsupported() }
func (d *Dir) Usage(id string) (used, size int64, err error)         { return 0, 0, unsupported() }
