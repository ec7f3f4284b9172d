package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/binary"
	"io"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Zip bombs, built streaming from a 1 MiB buffer of zeros at the fastest
// compression: about 1.3 MB each, built in well under a second.

const bombBytes = 1 << 30

func zeroChunks(w io.Writer, n int64) error {
	buf := make([]byte, 1<<20)
	for ; n > 0; n -= int64(len(buf)) {
		if _, err := w.Write(buf[:min(n, int64(len(buf)))]); err != nil {
			return err
		}
	}
	return nil
}

// zipBomb is one entry of 1 GiB of zeros whose headers say so.
func zipBomb(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, flate.BestSpeed) })
	w, err := zw.Create("zeros")
	if err != nil {
		t.Fatal(err)
	}
	if err := zeroChunks(w, bombBytes); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tgzBomb is a tar.gz of files of zeros.
func tgzBomb(t *testing.T, files int, each int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	gw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gw)
	for i := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "zeros" + string(rune('a'+i)), Mode: 0o644, Size: each}); err != nil {
			t.Fatal(err)
		}
		if err := zeroChunks(tw, each); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBombs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds archives of 1 GiB of zeros")
	}
	zb := zipBomb(t)
	// The same bomb with a central directory that says 1 KiB.
	lying := bytes.Clone(zb)
	cd := bytes.LastIndex(lying, []byte("PK\x01\x02"))
	binary.LittleEndian.PutUint32(lying[cd+24:], 1024)

	for _, tc := range []struct {
		name   string
		format Format
		data   []byte
		lim    UnpackLimits
		kind   kiln.Kind
		rule   string
	}{
		// Honest headers: refused on what they declare, before any inflating.
		{"zip declared", Zip, zb, UnpackLimits{}, kiln.TooLarge, "declares more than"},
		// With room for it, the ratio stops it: 200 times 1.3 MB.
		{"zip ratio", Zip, zb, UnpackLimits{MaxBytes: 2 << 30}, kiln.TooLarge, "200 times its compressed size"},
		// A header that lies about the size does not get past it.
		{"zip lying size", Zip, lying, UnpackLimits{}, kiln.TooLarge, "longer than the 1024 bytes it declares"},
		{"tgz declared", TarGz, tgzBomb(t, 1, bombBytes), UnpackLimits{}, kiln.TooLarge, "declares more than"},
		// 5 files of 100 MiB are within MaxBytes; the stream's expansion is not.
		{"tgz ratio", TarGz, tgzBomb(t, 5, 100<<20), UnpackLimits{}, kiln.TooLarge, "200 times its size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newRootFS(t)
			_, err := Unpack(context.Background(), fsys, "out", tc.format, bytes.NewReader(tc.data), tc.lim)
			if kiln.KindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.rule) {
				t.Errorf("Unpack = %v (kind %s); want kind %s, a message containing %q", err, kiln.KindOf(err), tc.kind, tc.rule)
			}
			if len(fsys.made) > 0 {
				t.Errorf("a bomb wrote %q", fsys.made)
			}
			t.Logf("%d-byte archive: %v", len(tc.data), err)
		})
	}
}

// TestMeterCountsActualBytes: the meter trusts no header. An entry that
// gives more than it declares, or entries that together give more than
// MaxBytes, stop at the limit with none of the excess handed on.
func TestMeterCountsActualBytes(t *testing.T) {
	m := &meter{lim: UnpackLimits{MaxBytes: 100, MaxRatio: 200, RatioMinBytes: 10}.withDefaults()}
	e := m.entry(header{name: "liar", size: 5, packed: -1}, strings.NewReader(strings.Repeat("x", 50)))
	n, err := io.Copy(io.Discard, e)
	if kiln.KindOf(err) != kiln.TooLarge || !strings.Contains(err.Error(), "longer than the 5 bytes it declares") || n > 5 {
		t.Errorf("entry past its declared size: %d bytes, %v", n, e.explain(err))
	}
	m = &meter{lim: UnpackLimits{MaxBytes: 100}.withDefaults()}
	var total int64
	for i := range 3 {
		e := m.entry(header{name: "part", size: 60, packed: -1}, strings.NewReader(strings.Repeat("x", 60)))
		n, err := io.Copy(io.Discard, e)
		total += n
		if i < 1 && err != nil {
			t.Fatal(err)
		}
		if i >= 1 && !strings.Contains(e.explain(err).Error(), "expands beyond 100 bytes") {
			t.Errorf("entry %d: %v; want the total refused", i, err)
		}
	}
	if total > 100 {
		t.Errorf("%d bytes handed on past a limit of 100", total)
	}
	m = &meter{lim: UnpackLimits{MaxRatio: 10, RatioMinBytes: 100}.withDefaults()}
	e = m.entry(header{name: "dense", size: 1000, packed: 20}, bytes.NewReader(make([]byte, 1000)))
	if n, err := io.Copy(io.Discard, e); !strings.Contains(err.Error(), "10 times") || n > 200 {
		t.Errorf("entry over the ratio: %d bytes, %v", n, err)
	}
}
