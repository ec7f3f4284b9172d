package archive

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// zipSource reads a spooled zip by its central directory, the list at the
// end. The names in the local headers before each entry's data are never
// used, so an archive whose two lists disagree cannot show one name to a
// checker and use another.
type zipSource struct {
	r    *zip.Reader
	size int64
}

// Bytes of central directory allowed per entry, on top of a fixed part for
// finding it. archive/zip parses every record before it can be asked how
// many there are, so a directory of millions of tiny records would cost
// gigabytes; this stops it at the read.
const (
	zipDirPerEntry = 1 << 10
	zipDirFixed    = 256 << 10
)

var errZipDirectory = errors.New("central directory over budget")

func openZip(f *os.File, size int64, lim UnpackLimits) (source, error) {
	b := &budgetReaderAt{r: f, left: zipDirFixed + int64(lim.MaxEntries)*zipDirPerEntry}
	r, err := zip.NewReader(b, size)
	b.left = -1 // the budget was for the directory; entries' data is bounded otherwise
	switch {
	case errors.Is(err, errZipDirectory):
		return nil, kiln.Errorf(kiln.TooLarge, "the zip archive's directory is too large for %d entries", lim.MaxEntries)
	case errors.Is(err, zip.ErrInsecurePath):
		// Only with GODEBUG=zipinsecurepath=0; the reader is whole, and
		// cleanName refuses those names with a better message.
	case err != nil:
		return nil, kiln.Errorf(kiln.Invalid, "not a valid zip archive: %v", err)
	}
	if len(r.File) > lim.MaxEntries {
		return nil, kiln.Errorf(kiln.TooLarge, "the archive has %d entries, more than %d", len(r.File), lim.MaxEntries)
	}
	if err := checkOverlap(r.File, size); err != nil {
		return nil, err
	}
	return &zipSource{r: r, size: size}, nil
}

// checkOverlap refuses entries whose data overlap: no tool makes them,
// and they are how a small zip holds many entries that each expand from
// the same compressed bytes.
func checkOverlap(files []*zip.File, size int64) error {
	type span struct {
		name       string
		start, end int64
	}
	var spans []span
	for _, f := range files {
		if f.CompressedSize64 == 0 {
			continue
		}
		start, err := f.DataOffset()
		if err != nil {
			return kiln.Errorf(kiln.Invalid, "archive entry %.200q cannot be read: %v", f.Name, err)
		}
		if f.CompressedSize64 > uint64(size) || start+int64(f.CompressedSize64) > size {
			return kiln.Errorf(kiln.Invalid, "archive entry %.200q refused: its data runs past the end of the archive", f.Name)
		}
		spans = append(spans, span{f.Name, start, start + int64(f.CompressedSize64)})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return kiln.Errorf(kiln.Invalid, "archive entry %.200q refused: its data overlaps that of %.200q", spans[i].name, spans[i-1].name)
		}
	}
	return nil
}

func (s *zipSource) walk(fn func(header, io.Reader) error) error {
	for _, f := range s.r.File {
		h := zipHeader(f, s.size)
		if h.typ != typeFile {
			if err := fn(h, nil); err != nil {
				return err
			}
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return kiln.Errorf(kiln.Invalid, "archive entry %.200q cannot be read: %v", f.Name, err)
		}
		err = fn(h, &overrun{r: rc, size: h.size})
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func zipHeader(f *zip.File, size int64) header {
	mode := f.Mode()
	h := header{name: f.Name, typ: typeFile, exec: mode&0o111 != 0, packed: int64(min(f.CompressedSize64, uint64(size)))}
	h.size = int64(min(f.UncompressedSize64, 1<<62))
	switch {
	case mode&fs.ModeSymlink != 0:
		h.typ, h.what = typeRefused, notFileOrDir("a symbolic link")
	case mode&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		h.typ, h.what = typeRefused, notFileOrDir("a device")
	case mode&fs.ModeNamedPipe != 0:
		h.typ, h.what = typeRefused, notFileOrDir("a FIFO")
	case mode&(fs.ModeSocket|fs.ModeIrregular) != 0:
		h.typ, h.what = typeRefused, notFileOrDir("a special file")
	case mode.IsDir():
		h.typ = typeDir
	case f.Flags&0x1 != 0:
		h.typ, h.what = typeRefused, "it is encrypted"
	case f.Method != zip.Store && f.Method != zip.Deflate:
		h.typ, h.what = typeRefused, fmt.Sprintf("it is compressed with method %d; only stored and deflated entries are read", f.Method)
	}
	return h
}

// budgetReaderAt fails reads once left bytes have been read; left < 0
// means no budget.
type budgetReaderAt struct {
	r    io.ReaderAt
	left int64
}

func (b *budgetReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if b.left >= 0 {
		if int64(len(p)) > b.left {
			return 0, errZipDirectory
		}
		b.left -= int64(len(p))
	}
	return b.r.ReadAt(p, off)
}

// overrun names archive/zip's complaint about an entry whose data runs past
// the size its header declares (a zip bomb with a lying header) as the
// meter would, instead of as "not a valid zip file". While reading data,
// archive/zip says ErrFormat for nothing else. It says it before handing
// on the excess, so the meter never sees it.
type overrun struct {
	r    io.Reader
	size int64
}

func (o *overrun) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if err == zip.ErrFormat {
		err = kiln.Errorf(kiln.TooLarge, "its data is longer than the %d bytes it declares", o.size)
	}
	return n, err
}
