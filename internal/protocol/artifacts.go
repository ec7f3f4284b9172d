package protocol

import "sort"

// FileWalk lists every regular file under the workspace, recursively, with
// paths relative to it, up to WalkMax files, without .kiln (kiln's own
// build caches). It answers ok with Entries whose Name is the path.
const FileWalk = "walk"

// WalkMax bounds a walk; a larger workspace is compared on its first files.
const WalkMax = 10000

// Diff lists the files created, changed (size or time) or deleted between
// two walks, sorted by path.
func Diff(before, after []FileInfo) []Artifact {
	old := make(map[string]FileInfo, len(before))
	for _, f := range before {
		old[f.Name] = f
	}
	var out []Artifact
	seen := make(map[string]bool, len(after))
	for _, f := range after {
		seen[f.Name] = true
		o, ok := old[f.Name]
		switch {
		case !ok:
			out = append(out, Artifact{Path: f.Name, Size: f.Size, Change: "created"})
		case o.Size != f.Size || o.ModTime != f.ModTime:
			out = append(out, Artifact{Path: f.Name, Size: f.Size, Change: "modified"})
		}
	}
	for _, f := range before {
		if !seen[f.Name] {
			out = append(out, Artifact{Path: f.Name, Change: "deleted"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
