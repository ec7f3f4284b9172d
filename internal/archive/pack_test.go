package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// srcTree makes a tree with what a workspace holds: nested and empty
// directories, an executable, an empty file, a file of several agent
// chunks, symlinks (one pointing out), and a name no archive should hold.
func srcTree(t *testing.T) *rootFS {
	fsys := newRootFS(t)
	big := make([]byte, 600<<10)
	rand.NewChaCha8([32]byte{1}).Read(big)
	fsys.put(t, "src/a.txt", "hello", 0o644)
	fsys.put(t, "src/bin/run.sh", "#!/bin/sh\necho hi\n", 0o755)
	fsys.put(t, "src/deep/x/y/z.txt", "deep", 0o600)
	fsys.put(t, "src/zero", "", 0o644)
	fsys.put(t, "src/big.bin", string(big), 0o644)
	fsys.put(t, `src/back\slash`, "unsafe in an archive", 0o644)
	for _, err := range []error{
		os.Mkdir(filepath.Join(fsys.dir, "src/empty"), 0o755),
		os.Symlink("a.txt", filepath.Join(fsys.dir, "src/link")),
		os.Symlink("/etc/passwd", filepath.Join(fsys.dir, "src/out")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return fsys
}

// The entries Pack makes of srcTree: directories before their contents,
// names sorted, no links, nothing unsafe.
var srcNames = []string{"a.txt", "big.bin", "bin/", "bin/run.sh", "deep/", "deep/x/", "deep/x/y/", "deep/x/y/z.txt", "empty/", "zero"}

func TestPackUnpackRoundTrip(t *testing.T) {
	for _, format := range []Format{Zip, Tar, TarGz} {
		t.Run(string(format), func(t *testing.T) {
			fsys := srcTree(t)
			ctx := context.Background()
			var buf bytes.Buffer
			if err := Pack(ctx, fsys, "/src", format, &buf, PackLimits{}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(srcNames, entryNames(t, format, buf.Bytes())); diff != "" {
				t.Errorf("archive entries (-want +got):\n%s", diff)
			}
			if _, err := Unpack(ctx, fsys, "dst", format, &buf, UnpackLimits{}); err != nil {
				t.Fatal(err)
			}
			want := fsys.tree(t, "src")
			for _, skipped := range []string{"link", "out", `back\slash`} {
				delete(want, skipped)
			}
			if diff := cmp.Diff(want, fsys.tree(t, "dst")); diff != "" {
				t.Errorf("unpacked tree (-want +got):\n%s", diff)
			}
		})
	}
}

// entryNames lists an archive's entry names as a reader sees them.
func entryNames(t *testing.T, format Format, data []byte) []string {
	t.Helper()
	var names []string
	if format == Zip {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		return names
	}
	var r io.Reader = bytes.NewReader(data)
	if format == TarGz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

func TestPackLimits(t *testing.T) {
	fsys := srcTree(t)
	for _, tc := range []struct {
		lim  PackLimits
		rule string
	}{
		{PackLimits{MaxEntries: 3}, "src holds more than 3 files and directories"},
		{PackLimits{MaxBytes: 100 << 10}, "src holds more than 102400 bytes"},
		{PackLimits{MaxDepth: 2}, "src/deep/x/y is nested more than 2 directories deep"},
	} {
		var buf bytes.Buffer
		err := Pack(context.Background(), fsys, "src", Tar, &buf, tc.lim)
		if kiln.KindOf(err) != kiln.TooLarge || !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("Pack with %+v = %v; want too_large, %q", tc.lim, err, tc.rule)
		}
		if buf.Len() > 0 {
			t.Errorf("Pack with %+v wrote %d bytes before failing", tc.lim, buf.Len())
		}
	}
	if err := Pack(context.Background(), fsys, "src", "rar", io.Discard, PackLimits{}); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("Pack as rar = %v, want invalid", err)
	}
	if err := Pack(context.Background(), fsys, "nope", Zip, io.Discard, PackLimits{}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Pack of a missing directory = %v", err)
	}
}

// shrinking is an FS whose files lose a byte between listing and reading.
type shrinking struct{ *rootFS }

func (s shrinking) ReadTo(ctx context.Context, p string, w io.Writer, limit int64) (int64, error) {
	return s.rootFS.ReadTo(ctx, p, w, limit-1)
}

func TestPackFileShrinks(t *testing.T) {
	fsys := newRootFS(t)
	fsys.put(t, "f", "12345", 0o644)
	err := Pack(context.Background(), shrinking{fsys}, "", Tar, io.Discard, PackLimits{})
	if kiln.KindOf(err) != kiln.Conflict || !strings.Contains(err.Error(), "f shrank") {
		t.Errorf("Pack of a shrinking file = %v, want a conflict", err)
	}
}
