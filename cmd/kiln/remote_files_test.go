package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFilesCommands(t *testing.T) {
	f := newFakeKiln(t)
	f.goldenCases(t, []cliCase{
		{"files-ls", "", []string{"files", "ls", "s1"}},
		{"files-ls-dir", "", []string{"files", "ls", "s1", "data"}},
		{"files-ls-json", "", []string{"files", "ls", "--json", "s1", "/data"}},
		{"files-get-stdout", "", []string{"files", "get", "s1", "notes.txt", "-"}},
		{"files-get-dir", "", []string{"files", "get", "s1", "data"}},
		{"files-get-missing", "", []string{"files", "get", "s1", "nope.txt", "-"}},
		{"files-get-archive-stdout", "", []string{"files", "get", "--archive", "zip", "s1", "data", "-"}},
		{"files-rm-dir", "", []string{"files", "rm", "s1", "data"}},
	})
}

func TestFilesPut(t *testing.T) {
	f := newFakeKiln(t)
	dir := t.TempDir()
	local := filepath.Join(dir, "report.md")
	os.WriteFile(local, []byte("# hi\n"), 0o644)
	for _, tt := range []struct {
		args []string
		path string // where the file lands in the workspace
	}{
		{[]string{"files", "put", "s1", local}, "report.md"},
		{[]string{"files", "put", "s1", local, "docs/"}, "docs/report.md"},
		{[]string{"files", "put", "s1", local, "/docs/renamed.md"}, "docs/renamed.md"},
	} {
		if r := f.run(t, "", tt.args...); r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Errorf("kiln %q: exit %d, stdout %q, stderr %q", tt.args, r.code, r.stdout, r.stderr)
		}
		if got := string(f.file(tt.path)); got != "# hi\n" {
			t.Errorf("kiln %q: the workspace's %s holds %q", tt.args, tt.path, got)
		}
	}
	if r := f.run(t, "piped\n", "files", "put", "s1", "-", "in.txt"); r.code != 0 || string(f.file("in.txt")) != "piped\n" {
		t.Errorf("put from stdin: exit %d, stderr %q, file %q", r.code, r.stderr, f.file("in.txt"))
	}
	r := f.run(t, "", "files", "put", "--no-overwrite", "s1", local, "report.md")
	if r.code != 125 || r.stderr != "kiln: report.md exists\n" {
		t.Errorf("--no-overwrite on an existing file: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := f.run(t, "", "files", "put", "s1", filepath.Join(dir, "missing")); r.code != 125 || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("a missing local file: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestFilesPutDirectory: a directory goes as one tar, unpacked where
// asked; links and special files stay behind, with a warning.
func TestFilesPutDirectory(t *testing.T) {
	f := newFakeKiln(t)
	root := filepath.Join(t.TempDir(), "proj")
	for name, content := range map[string]string{"main.py": "print(1)\n", "pkg/util.py": "x = 1\n", "pkg/deep/data.bin": "\x00\x01"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(content), 0o644)
	}
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	r := f.run(t, "", "files", "put", "s1", root)
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if want := "kiln: skipped " + filepath.Join(root, "link") + ": only regular files and directories are sent\n"; r.stderr != want {
		t.Errorf("stderr %q; want %q", r.stderr, want)
	}
	var got []string
	for _, p := range f.paths() {
		if strings.HasPrefix(p, "proj/") {
			got = append(got, p+"="+string(f.file(p)))
		}
	}
	sort.Strings(got)
	want := []string{"proj/main.py=print(1)\n", "proj/pkg/deep/data.bin=\x00\x01", "proj/pkg/util.py=x = 1\n"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("workspace (-want +got):\n%s", d)
	}
	if got := f.sent(); got[len(got)-1] != "POST /v1/sessions/s1/files/proj?extract=tar" {
		t.Errorf("last request %q; want the extract into proj", got[len(got)-1])
	}
	// Into a named directory.
	if r := f.run(t, "", "files", "put", "s1", root+"/", "src"); r.code != 0 || string(f.file("src/pkg/util.py")) != "x = 1\n" {
		t.Errorf("put DIR src: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestFilesGet(t *testing.T) {
	f := newFakeKiln(t)
	dir := t.TempDir()
	check := func(args []string, path, want string) {
		t.Helper()
		r := f.run(t, "", args...)
		if r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Errorf("kiln %q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("kiln %q: %s holds %q (%v); want %q", args, path, b, err, want)
		}
	}
	check([]string{"files", "get", "s1", "data/a.csv", filepath.Join(dir, "out.csv")}, filepath.Join(dir, "out.csv"), "x,y\n1,2\n")
	check([]string{"files", "get", "s1", "/data/a.csv", dir}, filepath.Join(dir, "a.csv"), "x,y\n1,2\n")
	check([]string{"files", "get", "--archive", "tar", "s1", "data", dir}, filepath.Join(dir, "data.tar"), "ARCHIVE OF data AS tar")
	check([]string{"files", "get", "--archive", "zip", "s1", "", dir}, filepath.Join(dir, "workspace.zip"), "ARCHIVE OF  AS zip")
	// A failed download leaves nothing behind, not even a temporary file.
	before, _ := os.ReadDir(dir)
	if r := f.run(t, "", "files", "get", "--archive", "tar", "s1", "notes.txt", dir); r.code != 125 {
		t.Errorf("archive of a file: exit %d; want 125", r.code)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("a failed get left files: %d entries, before %d", len(after), len(before))
	}
	// Without LOCAL, the file lands in the working directory.
	t.Chdir(dir)
	check([]string{"files", "get", "s1", "notes.txt"}, filepath.Join(dir, "notes.txt"), "hello\n")
}

func TestFilesRemove(t *testing.T) {
	f := newFakeKiln(t)
	if r := f.run(t, "", "files", "rm", "s1", "data", "-r"); r.code != 0 || r.stderr != "" {
		t.Errorf("rm -r: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := f.run(t, "", "files", "rm", "s1", "notes.txt", "nope"); r.code != 125 || r.stderr != "kiln: no file nope\n" {
		t.Errorf("rm of a missing file: exit %d, stderr %q", r.code, r.stderr)
	}
	want := []string{
		"DELETE /v1/sessions/s1/files/data?recursive=true",
		"DELETE /v1/sessions/s1/files/notes.txt",
		"DELETE /v1/sessions/s1/files/nope",
	}
	if d := cmp.Diff(want, f.sent()); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
}
