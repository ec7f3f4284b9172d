package archive

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"io"
	"io/fs"
	"time"
)

// writer is one archive being written.
type writer interface {
	dir(it item) error
	file(it item) (io.Writer, error) // the file's data goes to the writer returned
	close() error
}

func newWriter(f Format, w io.Writer) writer {
	switch f {
	case Zip:
		return zipWriter{zip.NewWriter(w)}
	case TarGz:
		gz := gzip.NewWriter(w)
		return &tarWriter{tw: tar.NewWriter(gz), gz: gz}
	}
	return &tarWriter{tw: tar.NewWriter(w)}
}

// modTime drops the sub-second part, which USTAR cannot hold, so every
// format says the same.
func modTime(it item) time.Time { return time.Unix(it.info.ModTime/1e9, 0) }

type zipWriter struct{ zw *zip.Writer }

func (z zipWriter) dir(it item) error {
	h := &zip.FileHeader{Name: it.name + "/", Modified: modTime(it)}
	h.SetMode(fs.ModeDir | fs.FileMode(it.info.Mode)&fs.ModePerm)
	_, err := z.zw.CreateHeader(h)
	return err
}

func (z zipWriter) file(it item) (io.Writer, error) {
	h := &zip.FileHeader{Name: it.name, Method: zip.Deflate, Modified: modTime(it)}
	h.SetMode(fs.FileMode(it.info.Mode) & fs.ModePerm)
	return z.zw.CreateHeader(h)
}

func (z zipWriter) close() error { return z.zw.Close() }

type tarWriter struct {
	tw *tar.Writer
	gz *gzip.Writer // nil for a plain tar
}

func (t *tarWriter) dir(it item) error {
	return t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: it.name + "/",
		Mode: int64(it.info.Mode & 0o777), ModTime: modTime(it)})
}

func (t *tarWriter) file(it item) (io.Writer, error) {
	err := t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: it.name,
		Mode: int64(it.info.Mode & 0o777), Size: it.info.Size, ModTime: modTime(it)})
	return t.tw, err
}

func (t *tarWriter) close() error {
	err := t.tw.Close()
	if t.gz != nil {
		if gerr := t.gz.Close(); err == nil {
			err = gerr
		}
	}
	return err
}
