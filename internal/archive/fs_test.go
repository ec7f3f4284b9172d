package archive

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/protocol"
)

var _ FS = (*agentclient.Client)(nil)

// rootFS is FS over an os.Root on a test directory, like the agent's file
// operations over the workspace. It records every path it is asked to
// write or make, and the bytes written, so tests can check where Unpack
// went and how much it wrote.
type rootFS struct {
	dir     string
	root    *os.Root
	made    []string
	written int64
}

func newRootFS(t testing.TB) *rootFS {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &rootFS{dir: dir, root: root}
}

// rel turns a workspace path into a name in the root, as the agent does.
func rel(p string) string {
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return "."
	}
	return p
}

func (r *rootFS) List(ctx context.Context, p string) ([]protocol.FileInfo, error) {
	f, err := r.root.Open(rel(p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []protocol.FileInfo
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		typ := "other"
		switch {
		case fi.Mode().IsRegular():
			typ = "file"
		case fi.IsDir():
			typ = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			typ = "symlink"
		}
		out = append(out, protocol.FileInfo{Name: e.Name(), Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), Type: typ, ModTime: fi.ModTime().UnixNano()})
	}
	return out, nil
}

func (r *rootFS) ReadTo(ctx context.Context, p string, w io.Writer, limit int64) (int64, error) {
	f, err := r.root.Open(rel(p))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.Copy(w, io.LimitReader(f, limit))
}

func (r *rootFS) WriteFrom(ctx context.Context, p string, src io.Reader, mode uint32) (int64, error) {
	name := rel(p)
	r.made = append(r.made, p)
	if d := path.Dir(name); d != "." {
		if err := r.root.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	f, err := r.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(mode&0o777))
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, src)
	r.written += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func (r *rootFS) Mkdir(ctx context.Context, p string) error {
	r.made = append(r.made, p)
	return r.root.MkdirAll(rel(p), 0o755)
}

// put makes a file in the root for a test.
func (r *rootFS) put(t testing.TB, name, data string, mode fs.FileMode) {
	t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

// tree describes what is under dir in the root: each entry's type, its
// execute bit, and a file's contents.
func (r *rootFS) tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	base := filepath.Join(r.dir, dir)
	out := map[string]string{}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == base {
			return err
		}
		name, _ := filepath.Rel(base, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out[name] = "dir"
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			kind := "file"
			if fi.Mode()&0o100 != 0 {
				kind = "exec"
			}
			out[name] = kind + ":" + string(data)
		default:
			out[name] = "other"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
