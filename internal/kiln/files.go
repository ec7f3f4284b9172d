package kiln

import "time"

// FileInfo describes one workspace file or directory, as every front end
// shows it.
type FileInfo struct {
	Path    string    // from the workspace root, "" for the root itself
	Name    string    // the last element of Path, "." for the root
	Type    string    // file, dir, symlink, other
	Size    int64     // bytes
	Mode    uint32    // permission bits
	ModTime time.Time // UTC
}
