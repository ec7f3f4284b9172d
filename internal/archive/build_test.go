package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"hash/crc32"
	"io/fs"
	"testing"
)

// Archives for tests, built with the standard library's writers, which
// write whatever names and types they are given.

type zent struct {
	name  string
	data  string
	mode  fs.FileMode // 0: a 0644 file, or a directory when name ends in /
	raw   *zip.FileHeader
	flags uint16
}

func buildZip(t testing.TB, ents ...zent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		if e.raw != nil {
			// Written as it is: any method, any sizes.
			w, err := zw.CreateRaw(e.raw)
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(e.data))
			continue
		}
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Flags: e.flags}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawZip is a stored entry with any method number.
func rawZip(name, data string, method uint16) zent {
	return zent{data: data, raw: &zip.FileHeader{Name: name, Method: method, CRC32: crc32.ChecksumIEEE([]byte(data)),
		CompressedSize64: uint64(len(data)), UncompressedSize64: uint64(len(data))}}
}

type tent struct {
	hdr  tar.Header
	data string
}

func file(name, data string) tent {
	return tent{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data))}, data}
}

func special(typ byte, name, link string) tent {
	return tent{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: link, Mode: 0o644}}
}

func buildTar(t testing.TB, gz bool, ents ...tent) []byte {
	t.Helper()
	var buf bytes.Buffer
	var gw *gzip.Writer
	tw := tar.NewWriter(&buf)
	if gz {
		gw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(gw)
	}
	for _, e := range ents {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if gw != nil {
		if err := gw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}
