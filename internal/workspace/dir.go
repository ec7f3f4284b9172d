package workspace

import (
	"os"
	"path/filepath"
	"strings"
)

// imageSuffix ends the name of a disk workspace's image: <root>/<id>.img.
const imageSuffix = ".img"

// Dir is the directory that holds the workspaces, one mount per id.
type Dir struct {
	root string
	kind Kind // what Create makes
}

// Root is the directory Open was given, cleaned.
func (d *Dir) Root() string { return d.root }

// Kind is what Create makes.
func (d *Dir) Kind() Kind { return d.kind }

// Path is where workspace id is (or would be) mounted. It does not say
// whether the mount is there: a directory without its mount (after a
// reboot) is on the root's own filesystem and has no size limit, so check
// Exists (or Restore) before handing the path to a sandbox.
func (d *Dir) Path(id string) string { return filepath.Join(d.root, id) }

// List returns the ids of the workspaces under the root, mounted or not
// (a directory, a disk image or both), so that the service can remove the
// ones it no longer knows. Entries that are not kiln's are left out.
func (d *Dir) List() ([]string, error) {
	ents, err := os.ReadDir(d.root)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var ids []string
	for _, e := range ents {
		id, isImage := strings.CutSuffix(e.Name(), imageSuffix)
		kilns := isImage && e.Type().IsRegular() || !isImage && e.IsDir()
		if !kilns || validID(id) != nil || seen[id] {
			continue
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids, nil
}
