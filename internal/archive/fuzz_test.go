package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Small limits keep each fuzz run fast and let it reach them.
var fuzzLimits = UnpackLimits{MaxArchiveBytes: 1 << 20, MaxEntries: 32, MaxBytes: 1 << 20, MaxRatio: 50, RatioMinBytes: 64 << 10}

func FuzzUnpackZip(f *testing.F) {
	f.Add(buildZip(f, zent{name: "a.txt", data: "hello"}, zent{name: "d/"}, zent{name: "d/b", data: "b"}))
	f.Add(buildZip(f, zent{name: "../x", data: "x"}))
	f.Add(buildZip(f, zent{name: "l", data: "/etc", mode: fs.ModeSymlink | 0o777}))
	f.Add(buildZip(f, zent{name: "z", data: strings.Repeat("\x00", 200<<10)}))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzUnpack(t, Zip, data) })
}

func FuzzUnpackTar(f *testing.F) {
	f.Add(buildTar(f, false, file("a.txt", "hello"), special(tar.TypeDir, "d/", ""), file("d/b", "b")))
	f.Add(buildTar(f, true, file("./x", "x"), file("y", strings.Repeat("\x00", 200<<10))))
	f.Add(buildTar(f, false, special(tar.TypeSymlink, "l", "/etc"), file("l/passwd", "x")))
	f.Add(buildTar(f, false, file("../../etc/passwd", "x")))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzUnpack(t, Tar, data) })
}

// fuzzUnpack checks what must hold for any input: no panic; every path
// handed to the FS is a clean name under the target; no more bytes or
// entries than the limits; nothing beside the target; and a refusal is
// the archive's fault (invalid, too large), never an internal error.
func fuzzUnpack(t *testing.T, format Format, data []byte) {
	fsys := newRootFS(t)
	paths, err := Unpack(context.Background(), fsys, "out", format, bytes.NewReader(data), fuzzLimits)
	for _, p := range fsys.made {
		rest, ok := strings.CutPrefix(p, "out/")
		if !ok || rest == "" || path.Clean(rest) != rest || rest == ".." || strings.HasPrefix(rest, "../") || strings.ContainsAny(rest, "\\\x00") {
			t.Fatalf("Unpack asked the FS for %q, outside out/ or not clean", p)
		}
	}
	if fsys.written > fuzzLimits.MaxBytes || len(fsys.made) > fuzzLimits.MaxEntries {
		t.Fatalf("Unpack wrote %d bytes in %d entries, past the limits", fsys.written, len(fsys.made))
	}
	if len(paths) > len(fsys.made) {
		t.Fatalf("Unpack returned %d paths but made %d", len(paths), len(fsys.made))
	}
	if top := topLevel(t, fsys); len(top) > 1 || len(top) == 1 && top["out"] != "dir" {
		t.Fatalf("Unpack wrote beside the target: %v", top)
	}
	if k := kiln.KindOf(err); err != nil && k != kiln.Invalid && k != kiln.TooLarge {
		t.Fatalf("Unpack = %v (kind %s); want invalid or too_large", err, k)
	}
}
