package compat

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// The program languages' cases that a user of the host's toolchains
// expects: each runs as a cell of a kiln session and with the toolchain
// on the host, and both must agree.

func programSession(t *testing.T) *engine.Session {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
	b, err := native.New(native.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := engine.New(b, slog.New(slog.NewTextHandler(io.Discard, nil))).NewSession(context.Background(), engine.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func needRuntime(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		l, err := lang.Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Available(); err != nil {
			t.Skip(kiln.Message(err))
		}
	}
}

// hostRun runs argv in dir on the host: what a user of the toolchain sees.
func hostRun(t *testing.T, dir string, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if x, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), x.ExitCode()
	} else if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return o.String(), e.String(), 0
}

func hostFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runCell(t *testing.T, s *engine.Session, c engine.Cell) kiln.CellResult {
	t.Helper()
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute // a cold build on a busy host
	}
	res, err := s.Run(context.Background(), c, engine.Events{})
	if err != nil {
		t.Fatalf("%s cell: %v", c.Language, err)
	}
	return res
}

func exitOf(res kiln.CellResult) int {
	if res.ExitCode == nil {
		return -1
	}
	return *res.ExitCode
}

// TestRustWrongSolutionInTests: a Rust file whose checks are #[test]
// functions beside an empty main fails when the solution is wrong, as
// "rustc --test" does on the host; it must not pass silently.
func TestRustWrongSolutionInTests(t *testing.T) {
	needRuntime(t, "rust")
	s := programSession(t)
	src := "fn add(a: i32, b: i32) -> i32 { a - b }\n\nfn main() {}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn adds() {\n        assert_eq!(add(2, 2), 4);\n    }\n}\n"
	res := runCell(t, s, engine.Cell{Language: "rust", Code: src, Name: "sol.rs"})
	dir := hostFiles(t, map[string]string{"sol.rs": src})
	hostRun(t, dir, "rustc", "--edition", "2021", "--test", "-o", "sol", "sol.rs")
	_, _, hostCode := hostRun(t, dir, "./sol")
	if hostCode == 0 {
		t.Fatal("the host's test run passed a wrong solution; the case is broken")
	}
	if exitOf(res) != hostCode || res.Status != kiln.StatusError || !strings.Contains(res.Stdout, "FAILED") {
		t.Errorf("status %s, exit %d, stdout %q; want the tests run and failing with exit %d, as on the host", res.Status, exitOf(res), res.Stdout, hostCode)
	}
}

// TestJavaFileNamedAfterItsClass: Foo.java with public class Foo runs, and
// so does test.java with public class HelloWorld, as the host's "java
// FILE" runs them.
func TestJavaFileNamedAfterItsClass(t *testing.T) {
	needRuntime(t, "java")
	s := programSession(t)
	for _, c := range []struct{ name, class string }{{"Foo.java", "Foo"}, {"test.java", "HelloWorld"}} {
		src := "public class " + c.class + " {\n    public static void main(String[] args) {\n        System.out.println(\"I am " + c.class + "\");\n    }\n}\n"
		res := runCell(t, s, engine.Cell{Language: "java", Code: src, Name: c.name})
		want, _, _ := hostRun(t, hostFiles(t, map[string]string{c.name: src}), "java", c.name)
		if res.Status != kiln.StatusOK || res.Stdout != want {
			t.Errorf("%s: status %s, stdout %q, error %+v; want %q as on the host", c.name, res.Status, res.Stdout, res.Error, want)
		}
	}
}

// TestCppHeaderBeside: a C++ program including a header in a folder beside
// it (openssl/md5.h) finds it, as g++ in that folder does.
func TestCppHeaderBeside(t *testing.T) {
	needRuntime(t, "cpp")
	s := programSession(t)
	header := "#pragma once\n#define MD5_NAME \"md5 from beside\"\n"
	src := "#include <iostream>\n#include \"openssl/md5.h\"\nint main() { std::cout << MD5_NAME << '\\n'; }\n"
	if err := s.Agent().WriteFile(context.Background(), "openssl/md5.h", []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runCell(t, s, engine.Cell{Language: "cpp", Code: src})
	dir := hostFiles(t, map[string]string{"main.cpp": src, "openssl/md5.h": header})
	hostRun(t, dir, "g++", "-o", "main", "main.cpp")
	want, _, _ := hostRun(t, dir, "./main")
	if res.Status != kiln.StatusOK || res.Stdout != want {
		t.Errorf("status %s, stdout %q, error %+v; want %q as on the host", res.Status, res.Stdout, res.Error, want)
	}
}

// TestGoVersionInBash: the toolchains kiln uses are on the sandbox's PATH.
func TestGoVersionInBash(t *testing.T) {
	needRuntime(t, "go", "bash")
	s := programSession(t)
	res := runCell(t, s, engine.Cell{Language: "bash", Code: "go version"})
	want, _, _ := hostRun(t, t.TempDir(), "go", "version")
	if res.Status != kiln.StatusOK || res.Stdout != want {
		t.Errorf("status %s, stdout %q, stderr %q; want %q as on the host", res.Status, res.Stdout, res.Stderr, want)
	}
	// Every language's toolchain, by its command name, as a user types it.
	var script strings.Builder
	var names []string
	for _, name := range lang.Names() {
		l, _ := lang.Lookup(name)
		names = append(names, filepath.Base(l.Binary))
		script.WriteString("command -v " + filepath.Base(l.Binary) + " || echo missing " + filepath.Base(l.Binary) + "\n")
	}
	res = runCell(t, s, engine.Cell{Language: "bash", Code: script.String()})
	if strings.Contains(res.Stdout, "missing") || len(strings.Fields(res.Stdout)) != len(names) {
		t.Errorf("toolchains on the sandbox's PATH:\n%s\nwant each of %v found", res.Stdout, names)
	}
}

// TestStatsEveryProgramLanguage: every program language's result says what
// the build cost apart from the run; a cached build has no build usage.
func TestStatsEveryProgramLanguage(t *testing.T) {
	hello := map[string]string{
		"c":       "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n",
		"cpp":     "#include <iostream>\nint main() { std::cout << \"hi\\n\"; }\n",
		"fortran": "program hi\n  print '(a)', 'hi'\nend program hi\n",
		"go":      "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }\n",
		"java":    "public class Main { public static void main(String[] a) { System.out.println(\"hi\"); } }\n",
		"php":     "<?php echo \"hi\\n\";\n",
		"ruby":    "puts 'hi'\n",
		"rust":    "fn main() { println!(\"hi\"); }\n",
	}
	s := programSession(t)
	for _, name := range lang.Names() {
		if l, _ := lang.Lookup(name); l.Kind != lang.Program {
			continue
		}
		t.Run(name, func(t *testing.T) {
			needRuntime(t, name)
			src, ok := hello[name]
			if !ok {
				t.Fatalf("no hello world for %s", name)
			}
			first := runCell(t, s, engine.Cell{Language: name, Code: src})
			if first.Stdout != "hi\n" || first.BuildUsage == nil || first.BuildUsage.Wall <= 0 || first.Usage.Wall <= 0 {
				t.Errorf("first: stdout %q, build %+v, run %+v; want the build's and the run's usage apart", first.Stdout, first.BuildUsage, first.Usage)
			}
			again := runCell(t, s, engine.Cell{Language: name, Code: src})
			if again.Stdout != "hi\n" || again.BuildUsage != nil || again.Usage.Wall <= 0 {
				t.Errorf("cached: stdout %q, build %+v, run %+v; want no build and the run's usage", again.Stdout, again.BuildUsage, again.Usage)
			}
		})
	}
}

// TestCWarnsAndRuns: a C program that warns still runs; its stderr is its
// own, as on the host, and the warning is a diagnostic of the result.
func TestCWarnsAndRuns(t *testing.T) {
	needRuntime(t, "c")
	s := programSession(t)
	src := "#include <stdio.h>\nint main(void) {\n  int unused;\n  fprintf(stderr, \"program's own\\n\");\n  puts(\"ran\");\n  return 0;\n}\n"
	res := runCell(t, s, engine.Cell{Language: "c", Code: src})
	dir := hostFiles(t, map[string]string{"main.c": src})
	hostRun(t, dir, "gcc", "-Wall", "-o", "main", "main.c")
	stdout, stderr, _ := hostRun(t, dir, "./main")
	if res.Status != kiln.StatusOK || res.Stdout != stdout || res.Stderr != stderr {
		t.Errorf("status %s, stdout %q, stderr %q; want %q and %q as the host's program", res.Status, res.Stdout, res.Stderr, stdout, stderr)
	}
	if !slices.ContainsFunc(res.Diagnostics, func(d kiln.Diagnostic) bool {
		return d.Severity == "warning" && d.File == "main.c" && d.Line == 3
	}) {
		t.Errorf("diagnostics %+v; want the unused variable's warning at main.c:3", res.Diagnostics)
	}
}

// TestCellKeepsUserFiles: a C or Go cell leaves the user's own main.c and
// main.go byte for byte, reports no artifact, and puts nothing of kiln's
// in the workspace.
func TestCellKeepsUserFiles(t *testing.T) {
	needRuntime(t, "c", "go")
	s := programSession(t)
	ctx := context.Background()
	user := map[string]string{
		"main.c":  "/* the user's own */\nint main(void) { return 3; }\n",
		"main.go": "package main\n\n// the user's own\nfunc main() {}\n",
	}
	for name, data := range user {
		if err := s.Agent().WriteFile(ctx, name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cells := []engine.Cell{
		{Language: "c", Code: "#include <stdio.h>\nint main(void) { puts(\"cell\"); return 0; }\n"},
		{Language: "go", Code: "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"cell\") }\n"},
	}
	for _, c := range cells {
		res := runCell(t, s, c)
		if res.Stdout != "cell\n" || len(res.Artifacts) != 0 {
			t.Errorf("%s: stdout %q, artifacts %+v; want the cell's program and no artifact", c.Language, res.Stdout, res.Artifacts)
		}
	}
	for name, data := range user {
		got, err := s.Agent().ReadFile(ctx, name, 1<<20)
		if err != nil || string(got) != data {
			t.Errorf("the user's %s is %q (%v); want it unchanged", name, got, err)
		}
	}
	list, err := s.Agent().List(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"main.c", "main.go"}) {
		t.Errorf("the workspace holds %v; want only the user's main.c and main.go (no .kiln, no go.mod)", names)
	}
}
