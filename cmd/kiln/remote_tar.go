package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// writeTar writes the tree under root as a tar archive to w: directories
// and regular files with their permission bits and times, names relative
// to root with "/" separators. Links and special files are skipped with a
// warning, never followed, so the archive holds only what is under root.
func writeTar(w io.Writer, root string, stderr io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return kiln.Errorf(kiln.Invalid, "cannot read %s: %s", name, reason(err))
		}
		rel, err := filepath.Rel(root, name)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return kiln.Errorf(kiln.Invalid, "cannot read %s: %s", name, reason(err))
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			fmt.Fprintf(stderr, "kiln: skipped %s: only regular files and directories are sent\n", name)
			return nil
		}
		hdr := &tar.Header{
			Name:    filepath.ToSlash(rel),
			Mode:    int64(fi.Mode().Perm()),
			ModTime: fi.ModTime(),
		}
		if fi.IsDir() {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			return tw.WriteHeader(hdr)
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		f, err := os.Open(name)
		if err != nil {
			return kiln.Errorf(kiln.Invalid, "cannot read %s: %s", name, reason(err))
		}
		defer f.Close()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		// Exactly the size in the header: a file that grows while it is
		// read is cut there, one that shrinks is an error.
		if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
			return kiln.Errorf(kiln.Invalid, "cannot read %s: %s (did it change while it was sent?)", name, reason(err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
