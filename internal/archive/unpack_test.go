package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestUnpackRefuses gives Unpack hostile archives and checks that each is
// refused with the right kind, a message naming the entry and the rule,
// and nothing written.
func TestUnpackRefuses(t *testing.T) {
	long := strings.Repeat("d/", 150) + "../../../../x" // long enough for a PAX name record
	for _, tc := range []struct {
		name   string
		format Format
		data   func(t *testing.T) []byte
		lim    UnpackLimits
		kind   kiln.Kind
		entry  string // named in the message, unless ""
		rule   string // in the message
	}{
		{"zip dotdot", Zip, func(t *testing.T) []byte {
			return buildZip(t, zent{name: "ok.txt"}, zent{name: "../../etc/passwd", data: "x"})
		}, UnpackLimits{}, kiln.Invalid, "../../etc/passwd", ".. component"},
		{"zip absolute", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "/etc/x", data: "x"}) }, UnpackLimits{}, kiln.Invalid, "/etc/x", "absolute"},
		{"zip backslash", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: `..\..\x`, data: "x"}) }, UnpackLimits{}, kiln.Invalid, `..\..\x`, "backslash"},
		{"zip drive letter", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "C:/Windows/x", data: "x"}) }, UnpackLimits{}, kiln.Invalid, "C:/Windows/x", "drive letter"},
		{"zip NUL", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "a\x00b", data: "x"}) }, UnpackLimits{}, kiln.Invalid, "a\x00b", "NUL"},
		{"zip empty name", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "", data: "x"}) }, UnpackLimits{}, kiln.Invalid, "", "the name is empty"},
		{"zip dot file", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "./.", data: "x"}) }, UnpackLimits{}, kiln.Invalid, "./.", "empty once cleaned"},
		{"zip duplicate", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "a.txt"}, zent{name: "./a.txt"}) }, UnpackLimits{}, kiln.Invalid, "./a.txt", "twice"},
		{"zip under a file", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "a"}, zent{name: "a/b"}) }, UnpackLimits{}, kiln.Invalid, "a/b", "as a file"},
		{"zip symlink", Zip, func(t *testing.T) []byte {
			return buildZip(t, zent{name: "link", data: "/etc", mode: fs.ModeSymlink | 0o777}, zent{name: "link/passwd", data: "x"})
		}, UnpackLimits{}, kiln.Invalid, "link", "symbolic link"},
		{"zip device", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "dev", mode: fs.ModeDevice | 0o644}) }, UnpackLimits{}, kiln.Invalid, "dev", "device"},
		{"zip char device", Zip, func(t *testing.T) []byte {
			return buildZip(t, zent{name: "null", mode: fs.ModeDevice | fs.ModeCharDevice | 0o644})
		}, UnpackLimits{}, kiln.Invalid, "null", "device"},
		{"zip fifo", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "p", mode: fs.ModeNamedPipe | 0o644}) }, UnpackLimits{}, kiln.Invalid, "p", "FIFO"},
		{"zip encrypted", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: "secret", data: "x", flags: 0x1}) }, UnpackLimits{}, kiln.Invalid, "secret", "encrypted"},
		{"zip unknown method", Zip, func(t *testing.T) []byte { return buildZip(t, rawZip("m.bin", "abc", 99)) }, UnpackLimits{}, kiln.Invalid, "m.bin", "method 99"},
		{"zip long component", Zip, func(t *testing.T) []byte { return buildZip(t, zent{name: strings.Repeat("n", 300)}) }, UnpackLimits{}, kiln.Invalid, strings.Repeat("n", 300), "255 bytes"},
		{"zip too many entries", Zip, func(t *testing.T) []byte {
			return buildZip(t, zent{name: "1"}, zent{name: "2"}, zent{name: "3"}, zent{name: "4"})
		}, UnpackLimits{MaxEntries: 3}, kiln.TooLarge, "", "more than 3"},
		{"zip declared total", Zip, func(t *testing.T) []byte {
			return buildZip(t, zent{name: "a", data: "123456"}, zent{name: "b", data: "123456"})
		}, UnpackLimits{MaxBytes: 10}, kiln.TooLarge, "b", "declares more than 10 bytes"},
		{"zip central name hostile, local name fine", Zip, func(t *testing.T) []byte {
			return patchName(t, buildZip(t, zent{name: "safe/ok.txt", data: "ok"}), "../../x.txt", true)
		}, UnpackLimits{}, kiln.Invalid, "../../x.txt", ".."},
		{"zip overlapping entries", Zip, func(t *testing.T) []byte { return overlapZip(t) }, UnpackLimits{}, kiln.Invalid, "b", "overlaps"},
		// 2000 records of 150-byte names are 390 KB of central directory:
		// refused as it is read, before archive/zip holds them all.
		{"zip directory over its budget", Zip, func(t *testing.T) []byte {
			var ents []zent
			for i := range 2000 {
				ents = append(ents, zent{name: fmt.Sprintf("%0150d", i)})
			}
			return buildZip(t, ents...)
		}, UnpackLimits{MaxEntries: 10}, kiln.TooLarge, "", "directory is too large for 10 entries"},
		{"not a zip", Zip, func(t *testing.T) []byte { return buildTar(t, false, file("a", "x")) }, UnpackLimits{}, kiln.Invalid, "", "not a valid zip"},

		{"tar dotdot", Tar, func(t *testing.T) []byte {
			return buildTar(t, false, file("../../etc/passwd", "root::0:0::/:/bin/sh\n"))
		}, UnpackLimits{}, kiln.Invalid, "../../etc/passwd", ".. component"},
		{"tar absolute", Tar, func(t *testing.T) []byte { return buildTar(t, false, file("/etc/x", "x")) }, UnpackLimits{}, kiln.Invalid, "/etc/x", "absolute"},
		{"tar long dotdot name", Tar, func(t *testing.T) []byte { return buildTar(t, false, file(long, "x")) }, UnpackLimits{}, kiln.Invalid, long, ".. component"},
		{"tar symlink then a file through it", Tar, func(t *testing.T) []byte {
			return buildTar(t, false, special(tar.TypeSymlink, "link", "/etc"), file("link/passwd", "x"))
		}, UnpackLimits{}, kiln.Invalid, "link", "symbolic link"},
		{"tar hardlink", Tar, func(t *testing.T) []byte {
			return buildTar(t, false, file("a", "x"), special(tar.TypeLink, "h", "/etc/passwd"))
		}, UnpackLimits{}, kiln.Invalid, "h", "hard link"},
		{"tar char device", Tar, func(t *testing.T) []byte { return buildTar(t, false, special(tar.TypeChar, "null", "")) }, UnpackLimits{}, kiln.Invalid, "null", "device"},
		{"tar block device", Tar, func(t *testing.T) []byte { return buildTar(t, false, special(tar.TypeBlock, "sda", "")) }, UnpackLimits{}, kiln.Invalid, "sda", "device"},
		{"tar fifo", Tar, func(t *testing.T) []byte { return buildTar(t, false, special(tar.TypeFifo, "p", "")) }, UnpackLimits{}, kiln.Invalid, "p", "FIFO"},
		{"tar duplicate", Tar, func(t *testing.T) []byte { return buildTar(t, false, file("a", "1"), file("a", "2")) }, UnpackLimits{}, kiln.Invalid, "a", "twice"},
		{"tar file then dir of the same name", Tar, func(t *testing.T) []byte {
			return buildTar(t, false, file("a", "1"), special(tar.TypeDir, "a/", ""))
		}, UnpackLimits{}, kiln.Invalid, "a/", "twice"},
		{"tar backslash", Tar, func(t *testing.T) []byte { return buildTar(t, false, file(`a\b`, "x")) }, UnpackLimits{}, kiln.Invalid, `a\b`, "backslash"},
		{"tar too many entries", Tar, func(t *testing.T) []byte {
			return buildTar(t, false, file("1", ""), file("2", ""), file("3", ""))
		}, UnpackLimits{MaxEntries: 2}, kiln.TooLarge, "3", "more than 2 entries"},
		{"tar declared total", Tar, func(t *testing.T) []byte { return buildTar(t, false, file("a", "123456"), file("b", "123456")) }, UnpackLimits{MaxBytes: 10}, kiln.TooLarge, "b", "declares more than 10 bytes"},
		{"tgz dotdot", TarGz, func(t *testing.T) []byte { return buildTar(t, true, file("ok", "x"), file("../../etc/passwd", "x")) }, UnpackLimits{}, kiln.Invalid, "../../etc/passwd", ".. component"},
		{"tgz as tar", Tar, func(t *testing.T) []byte { return buildTar(t, true, special(tar.TypeSymlink, "l", "/")) }, UnpackLimits{}, kiln.Invalid, "l", "symbolic link"},
		{"truncated tar", Tar, func(t *testing.T) []byte { return buildTar(t, false, file("a", strings.Repeat("x", 2000)))[:1000] }, UnpackLimits{}, kiln.Invalid, "a", "cannot be read"},
		{"xz", Tar, func(t *testing.T) []byte { return []byte("\xfd7zXZ\x00rest") }, UnpackLimits{}, kiln.Invalid, "", "xz"},
		{"unknown format", "rar", func(t *testing.T) []byte { return nil }, UnpackLimits{}, kiln.Invalid, "", "use zip, tar or tar.gz"},
		{"archive over its limit", Tar, func(t *testing.T) []byte { return buildTar(t, false, file("a", strings.Repeat("x", 5000))) }, UnpackLimits{MaxArchiveBytes: 4096}, kiln.TooLarge, "", "larger than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newRootFS(t)
			paths, err := Unpack(context.Background(), fsys, "out", tc.format, bytes.NewReader(tc.data(t)), tc.lim)
			if err == nil {
				t.Fatalf("Unpack succeeded, wrote %q", paths)
			}
			if kiln.KindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.rule) {
				t.Errorf("Unpack = %v (kind %s); want kind %s, a message containing %q", err, kiln.KindOf(err), tc.kind, tc.rule)
			}
			// Messages quote names, and cut them at 200 bytes.
			if tc.entry != "" && !strings.Contains(err.Error(), fmt.Sprintf("%.200q", tc.entry)) {
				t.Errorf("message %q does not name the entry %q", err, tc.entry)
			}
			if len(fsys.made) > 0 || len(paths) > 0 {
				t.Errorf("a refused archive wrote %q (returned %q)", fsys.made, paths)
			}
		})
	}
}

func TestUnpackWrites(t *testing.T) {
	global := tent{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "git"}}}
	for _, tc := range []struct {
		name   string
		format Format
		data   func(t *testing.T) []byte
		paths  []string
		tree   map[string]string
	}{
		{"tar made with -C dir .", Tar, func(t *testing.T) []byte {
			return buildTar(t, false, global, special(tar.TypeDir, "./", ""), special(tar.TypeDir, "./d/", ""), file("./d/a.txt", "a"),
				tent{tar.Header{Typeflag: tar.TypeReg, Name: "./run", Mode: 0o755, Size: 2}, "#!"})
		}, []string{"out/d", "out/d/a.txt", "out/run"}, map[string]string{"d": "dir", "d/a.txt": "file:a", "run": "exec:#!"}},
		{"tgz", TarGz, func(t *testing.T) []byte { return buildTar(t, true, file("a/b/c", "deep")) },
			[]string{"out/a/b/c"}, map[string]string{"a": "dir", "a/b": "dir", "a/b/c": "file:deep"}},
		{"zip with a directory after its file", Zip, func(t *testing.T) []byte {
			return buildZip(t, zent{name: "a/b.txt", data: "b"}, zent{name: "a/"}, zent{name: "empty/"})
		}, []string{"out/a/b.txt", "out/a", "out/empty"}, map[string]string{"a": "dir", "a/b.txt": "file:b", "empty": "dir"}},
		{"zip stored", Zip, func(t *testing.T) []byte { return buildZip(t, rawZip("s.txt", "stored", zip.Store)) },
			[]string{"out/s.txt"}, map[string]string{"s.txt": "file:stored"}},
		// archive/zip reads names from the central directory only; the
		// local header's name, which other tools may use, never counts.
		{"zip local name hostile, central name fine", Zip, func(t *testing.T) []byte {
			return patchName(t, buildZip(t, zent{name: "safe/ok.txt", data: "ok"}), "../../x.txt", false)
		}, []string{"out/safe/ok.txt"}, map[string]string{"safe": "dir", "safe/ok.txt": "file:ok"}},
		{"empty tar", Tar, func(t *testing.T) []byte { return buildTar(t, false) }, nil, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newRootFS(t)
			if err := os.Mkdir(fsys.dir+"/out", 0o755); err != nil {
				t.Fatal(err)
			}
			paths, err := Unpack(context.Background(), fsys, "out", tc.format, bytes.NewReader(tc.data(t)), UnpackLimits{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.paths, paths); diff != "" {
				t.Errorf("paths written (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.tree, fsys.tree(t, "out")); diff != "" {
				t.Errorf("tree (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"out": "dir"}, topLevel(t, fsys)); diff != "" {
				t.Errorf("something was written beside the target (-want +got):\n%s", diff)
			}
		})
	}
}

// topLevel lists the root's own entries.
func topLevel(t *testing.T, fsys *rootFS) map[string]string {
	ents, err := os.ReadDir(fsys.dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		out[e.Name()] = "other"
		if e.IsDir() {
			out[e.Name()] = "dir"
		}
	}
	return out
}

// patchName replaces an entry's name, of the same length, in the local
// header (central false) or in the central directory (central true) only.
func patchName(t *testing.T, z []byte, name string, central bool) []byte {
	t.Helper()
	old := []byte("safe/ok.txt")
	if len(name) != len(old) {
		t.Fatal("patchName needs a name of the same length")
	}
	i := bytes.Index(z, old)
	if central {
		i = bytes.LastIndex(z, old)
	}
	if i < 0 || bytes.Count(z, old) != 2 {
		t.Fatalf("name found %d times, want 2", bytes.Count(z, old))
	}
	out := bytes.Clone(z)
	copy(out[i:], name)
	return out
}

// overlapZip has two central directory records, a and b, for the same
// local entry: the shape of a non-recursive zip bomb, where many entries
// expand from one compressed kernel.
func overlapZip(t *testing.T) []byte {
	t.Helper()
	z := buildZip(t, zent{name: "a", data: strings.Repeat("x", 100)})
	end := bytes.LastIndex(z, []byte("PK\x05\x06"))
	dirSize := binary.LittleEndian.Uint32(z[end+12:])
	dirOff := binary.LittleEndian.Uint32(z[end+16:])
	rec := bytes.Clone(z[dirOff : dirOff+dirSize])
	if len(rec) != 46+1 || rec[46] != 'a' {
		t.Fatalf("unexpected central record %q", rec)
	}
	rec[46] = 'b'
	out := append(bytes.Clone(z[:end]), rec...)
	eocd := bytes.Clone(z[end:])
	binary.LittleEndian.PutUint16(eocd[8:], 2)
	binary.LittleEndian.PutUint16(eocd[10:], 2)
	binary.LittleEndian.PutUint32(eocd[12:], dirSize+uint32(len(rec)))
	return append(out, eocd...)
}
