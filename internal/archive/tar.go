package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// tarSource reads a spooled tar, gzip-compressed or not, from the start on
// every walk.
type tarSource struct {
	f    *os.File
	size int64
	gz   bool
	lim  UnpackLimits
}

// Header bytes a tar may spend per entry beyond its data: the 512-byte
// header, padding, and PAX or GNU records for long names.
const tarOverheadPerEntry = 16 << 10

func openTar(f *os.File, size int64, lim UnpackLimits) (source, error) {
	magic := make([]byte, 6)
	n, _ := f.ReadAt(magic, 0)
	magic = magic[:n]
	for _, c := range []struct {
		magic []byte
		name  string
	}{
		{[]byte("BZh"), "bzip2"},
		{[]byte("\xfd7zXZ\x00"), "xz"},
		{[]byte("\x28\xb5\x2f\xfd"), "zstd"},
	} {
		if bytes.HasPrefix(magic, c.magic) {
			return nil, kiln.Errorf(kiln.Invalid, "the archive is compressed with %s; only tar, tar.gz and zip are read", c.name)
		}
	}
	return &tarSource{f: f, size: size, gz: bytes.HasPrefix(magic, []byte{0x1f, 0x8b}), lim: lim}, nil
}

func (s *tarSource) walk(fn func(header, io.Reader) error) error {
	var r io.Reader = io.NewSectionReader(s.f, 0, s.size)
	if s.gz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return kiln.Errorf(kiln.Invalid, "not a valid gzip stream: %v", err)
		}
		defer zr.Close()
		// A gzip stream has no sizes per entry, so the bound is on the whole
		// stream: on its expansion and on its total.
		r = &streamMeter{r: zr, lim: s.lim,
			ratioMax: max(s.lim.RatioMinBytes, satMul(s.size, s.lim.MaxRatio)),
			max:      s.lim.MaxBytes + satMul(int64(s.lim.MaxEntries)+1, tarOverheadPerEntry)}
	}
	tr := tar.NewReader(r)
	last := ""
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		var ke *kiln.Error
		switch {
		case errors.Is(err, tar.ErrInsecurePath):
			// Only with GODEBUG=tarinsecurepath=0; hdr is whole, and
			// cleanName refuses its name with a better message.
		case errors.As(err, &ke):
			return err
		case err != nil && last == "":
			return kiln.Errorf(kiln.Invalid, "not a valid tar archive: %v", err)
		case err != nil:
			return kiln.Errorf(kiln.Invalid, "the tar archive is broken after entry %.200q: %v", last, err)
		}
		last = hdr.Name
		h := tarHeader(hdr)
		var data io.Reader
		if h.typ == typeFile {
			data = tr
		}
		if err := fn(h, data); err != nil {
			return err
		}
	}
}

func tarHeader(hdr *tar.Header) header {
	h := header{name: hdr.Name, typ: typeFile, exec: hdr.Mode&0o111 != 0, size: hdr.Size, packed: -1}
	switch hdr.Typeflag {
	case tar.TypeReg:
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				h.typ, h.what = typeRefused, "it is a sparse file"
			}
		}
	case tar.TypeDir:
		h.typ = typeDir
	case tar.TypeXGlobalHeader:
		h.typ = typeMeta
	case tar.TypeSymlink:
		h.typ, h.what = typeRefused, notFileOrDir("a symbolic link")
	case tar.TypeLink:
		h.typ, h.what = typeRefused, notFileOrDir("a hard link")
	case tar.TypeChar, tar.TypeBlock:
		h.typ, h.what = typeRefused, notFileOrDir("a device")
	case tar.TypeFifo:
		h.typ, h.what = typeRefused, notFileOrDir("a FIFO")
	case tar.TypeGNUSparse:
		h.typ, h.what = typeRefused, "it is a sparse file"
	default:
		h.typ, h.what = typeRefused, notFileOrDir(fmt.Sprintf("of tar type %q", hdr.Typeflag))
	}
	return h
}

// streamMeter bounds a decompressed stream, and hands on none of the bytes
// that pass a bound.
type streamMeter struct {
	r             io.Reader
	lim           UnpackLimits
	n             int64
	ratioMax, max int64
}

func (s *streamMeter) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	switch {
	case s.n > s.ratioMax:
		return 0, kiln.Errorf(kiln.TooLarge, "the archive expands more than %d times its size", s.lim.MaxRatio)
	case s.n > s.max:
		return 0, kiln.Errorf(kiln.TooLarge, "the archive expands beyond %d bytes", s.lim.MaxBytes)
	}
	return n, err
}
