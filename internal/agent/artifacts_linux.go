package agent

import (
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// snapshotMax bounds the files compared for artifacts; a workspace with
// more reports changes among the first ones only.
const snapshotMax = 10000

// hiddenDir holds kiln's own files in the workspace (build caches); they
// are not artifacts.
const hiddenDir = ".kiln"

type fileState struct {
	size  int64
	mtime int64
}

// snapshot records every regular file of the workspace.
func (a *Agent) snapshot() map[string]fileState {
	snap := map[string]fileState{}
	root := a.cfg.Workspace
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if len(snap) >= snapshotMax {
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
			snap[rel] = fileState{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		}
		return nil
	})
	return snap
}

// diff lists what changed between two snapshots, sorted by path.
func diff(before, after map[string]fileState) []protocol.Artifact {
	var out []protocol.Artifact
	for p, s := range after {
		old, ok := before[p]
		switch {
		case !ok:
			out = append(out, protocol.Artifact{Path: p, Size: s.size, Change: "created"})
		case old != s:
			out = append(out, protocol.Artifact{Path: p, Size: s.size, Change: "modified"})
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, protocol.Artifact{Path: p, Change: "deleted"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
