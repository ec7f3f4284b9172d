package archive

import (
	"context"
	"io"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// FS is the part of a sandbox's file operations that packing and unpacking
// need; *agentclient.Client has it. Paths are workspace paths, resolved
// (and confined) by the implementation.
type FS interface {
	// List lists a directory's entries with their types ("file", "dir",
	// "symlink", "other"), never following a symlink.
	List(ctx context.Context, path string) ([]protocol.FileInfo, error)
	// ReadTo copies at most limit bytes of a regular file into w and
	// returns how many; an error from w is returned as it is.
	ReadTo(ctx context.Context, path string, w io.Writer, limit int64) (int64, error)
	// WriteFrom creates or replaces a file, and its parents, with what r
	// gives; an error from r is returned as it is.
	WriteFrom(ctx context.Context, path string, r io.Reader, mode uint32) (int64, error)
	// Mkdir creates a directory and its parents; an existing one is fine.
	Mkdir(ctx context.Context, path string) error
}
