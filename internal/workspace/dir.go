package workspace

import (
	"os"
	"path/filepath"
)

// Dir is the directory that holds the workspaces, one mount per id.
type Dir struct {
	root string
}

// Root is the directory Open was given, cleaned.
func (d *Dir) Root() string { return d.root }

// Path is where workspace id is (or would be) mounted. It does not say
// whether the mount is there: a directory without its mount (after a
// reboot) is on the root's own filesystem and has no size limit, so check
// Exists before handing the path to a sandbox.
func (d *Dir) Path(id string) string { return filepath.Join(d.root, id) }

// List returns the ids of the workspace directories under the root,
// mounted or not, so that the service can remove the ones it no longer
// knows. Entries that are not directories with a valid id are not kiln's
// and are left out.
func (d *Dir) List() ([]string, error) {
	ents, err := os.ReadDir(d.root)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && validID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}
