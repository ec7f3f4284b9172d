package agent

import (
	"io/fs"
	"path/filepath"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// hiddenDir holds kiln's own files in the workspace (build caches); they
// are not artifacts.
const hiddenDir = ".kiln"

// snapshot lists every regular file of the workspace (see protocol.FileWalk).
func (a *Agent) snapshot() []protocol.FileInfo {
	var out []protocol.FileInfo
	root := a.cfg.Workspace
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if len(out) >= protocol.WalkMax {
			return filepath.SkipAll
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && rel == hiddenDir {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			info := toInfo(rel, fi)
			info.Name = rel
			out = append(out, info)
		}
		return nil
	})
	return out
}
