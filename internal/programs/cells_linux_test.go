package programs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestCellLeavesUserFilesAlone: a cell's code is built in the build area.
// The user's own main.c, main.go, Main.java and main.rs stay byte for byte,
// nothing else appears in the workspace (no go.mod, no .kiln), and the
// cell's program runs, not the user's file.
func TestCellLeavesUserFilesAlone(t *testing.T) {
	b := newBackend(t)
	cells := []struct{ lang, file, user, code, want string }{
		{"c", "main.c", "int main(void) { return 7; } /* the user's */\n",
			"#include <stdio.h>\nint main(void) { puts(\"cell\"); return 0; }\n", "cell\n"},
		{"go", "main.go", "package main\n\nfunc main() { panic(\"the user's\") }\n",
			"package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"cell\") }\n", "cell\n"},
		{"java", "Main.java", "public class Main { public static void main(String[] a) { System.exit(7); } }\n",
			"public class Main { public static void main(String[] a) { System.out.println(\"cell\"); } }\n", "cell\n"},
		{"rust", "main.rs", "fn main() { std::process::exit(7) }\n",
			"fn main() { println!(\"cell\"); }\n", "cell\n"},
	}
	sb := newSandbox(t, b, native.Spec{})
	for _, c := range cells {
		t.Run(c.lang, func(t *testing.T) {
			needLanguage(t, c.lang)
			ctx := context.Background()
			for _, ex := range []Execer{sb.Agent, newHost(t)} {
				if err := ex.WriteFile(ctx, c.file, []byte(c.user), 0o644); err != nil {
					t.Fatal(err)
				}
				o := run(t, ex, Program{Language: lng(c.lang), Code: []byte(c.code), Timeout: 2 * time.Minute})
				if o.res.Phase != PhaseRun || o.res.Exit.Code != 0 || o.stdout != c.want {
					t.Errorf("%T: got %v\nwant the cell's program printing %q", ex, o, c.want)
				}
				got, err := ex.ReadFile(ctx, c.file, 1<<20)
				if err != nil || string(got) != c.user {
					t.Errorf("%T: the user's %s is now %q (%v); want it unchanged", ex, c.file, got, err)
				}
				list, err := ex.List(ctx, ".")
				if err != nil || len(list) != 1 {
					t.Errorf("%T: the workspace holds %+v (%v); want only the user's %s", ex, list, err, c.file)
				}
				ex.Delete(ctx, c.file, false)
			}
		})
	}
}

// TestCellNames: diagnostics name the cell's file (its Name, or the file
// Java's public class needs), with the right line; a Java file named
// otherwise than its public class runs, as "java test.java" does.
func TestCellNames(t *testing.T) {
	needLanguage(t, "java")
	needLanguage(t, "c")
	h := newHost(t)
	hello := "public class HelloWorld {\n    public static void main(String[] args) {\n        System.out.println(\"hello\");\n    }\n}\n"
	o := run(t, h, Program{Language: lng("java"), Code: []byte(hello), Name: "test.java"})
	if o.res.Phase != PhaseRun || o.stdout != "hello\n" {
		t.Errorf("test.java with public class HelloWorld: %v\nwant it to run", o)
	}
	// The same file in the workspace, as "kiln run test.java" has it.
	o = run(t, h, Program{Language: lng("java"), Files: []File{{Path: "test.java", Data: []byte(hello)}}, Entry: "test.java"})
	if o.res.Phase != PhaseRun || o.stdout != "hello\n" {
		t.Errorf("workspace test.java with public class HelloWorld: %v\nwant it to run", o)
	}
	broken := strings.Replace(hello, `"hello");`, `"hello")`, 1)
	for _, p := range []Program{
		{Language: lng("java"), Code: []byte(broken), Name: "test.java"},
		{Language: lng("java"), Files: []File{{Path: "test.java", Data: []byte(broken)}}, Entry: "test.java"},
	} {
		o = run(t, h, p)
		if !hasDiag(o.res.Diagnostics, "error", "test.java", 3) || strings.Contains(o.res.CompileLog, "HelloWorld.java") || strings.Contains(o.res.CompileLog, "/.kiln/") {
			t.Errorf("diagnostics %+v, log:\n%s\nwant an error at test.java:3 and no other file name", o.res.Diagnostics, o.res.CompileLog)
		}
	}
	// No name: the file the class needs.
	o = run(t, h, Program{Language: lng("java"), Code: []byte(broken)})
	if !hasDiag(o.res.Diagnostics, "error", "HelloWorld.java", 3) {
		t.Errorf("diagnostics %+v; want an error at HelloWorld.java:3", o.res.Diagnostics)
	}
	o = run(t, h, Program{Language: lng("c"), Code: []byte("int main(void) {\n  return y;\n}\n"), Name: "sol.c"})
	if !hasDiag(o.res.Diagnostics, "error", "sol.c", 2) || strings.Contains(o.res.CompileLog, "/.kiln/") {
		t.Errorf("diagnostics %+v, log:\n%s\nwant an error at sol.c:2, and no build area in the log", o.res.Diagnostics, o.res.CompileLog)
	}
	// A link error has a file but no line.
	o = run(t, h, Program{Language: lng("c"), Code: []byte("int f(void);\nint main(void) { return f(); }\n")})
	if o.res.Phase != PhaseCompile || !slices.ContainsFunc(o.res.Diagnostics, func(d kiln.Diagnostic) bool {
		return d.Severity == "error" && strings.Contains(d.Message, "undefined reference") && d.File == "main.c"
	}) {
		t.Errorf("link error: diagnostics %+v; want an undefined reference in main.c", o.res.Diagnostics)
	}
}

func hasDiag(ds []kiln.Diagnostic, severity, file string, line int) bool {
	return slices.ContainsFunc(ds, func(d kiln.Diagnostic) bool {
		return d.Severity == severity && d.File == file && d.Line == line
	})
}

// TestTests: a file whose checks are tests beside an empty main runs its
// tests, and a wrong solution fails; tests beside a real main are reported
// as not run.
func TestTests(t *testing.T) {
	h := newHost(t)
	rust := func(answer string) string {
		return "fn add(a: i32, b: i32) -> i32 { " + answer + " }\n\nfn main() {}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn adds() {\n        assert_eq!(add(2, 2), 4);\n    }\n}\n"
	}
	goSrc := func(answer string) string {
		return "package main\n\nimport \"testing\"\n\nfunc add(a, b int) int { return " + answer + " }\n\nfunc main() {}\n\nfunc TestAdd(t *testing.T) {\n\tif add(2, 2) != 4 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n"
	}
	cases := []struct {
		lang, right, wrong string
	}{
		{"rust", rust("a + b"), rust("a - b")},
		{"go", goSrc("a + b"), goSrc("a - b")},
	}
	for _, c := range cases {
		t.Run(c.lang, func(t *testing.T) {
			needLanguage(t, c.lang)
			o := run(t, h, Program{Language: lng(c.lang), Code: []byte(c.wrong), Timeout: 2 * time.Minute})
			if o.res.Phase != PhaseRun || o.res.Exit.Code == 0 || !o.res.Tests {
				t.Errorf("a wrong solution: %v\nwant its tests run and failing", o)
			}
			o = run(t, h, Program{Language: lng(c.lang), Code: []byte(c.right), Timeout: 2 * time.Minute})
			if o.res.Phase != PhaseRun || o.res.Exit.Code != 0 || !o.res.Tests {
				t.Errorf("a right solution: %v\nwant its tests run and passing", o)
			}
		})
	}
	t.Run("go test file", func(t *testing.T) {
		needLanguage(t, "go")
		h := newHost(t)
		files := []File{
			{Path: "add.go", Data: []byte("package main\n\nfunc add(a, b int) int { return a - b }\n\nfunc main() {}\n")},
			{Path: "add_test.go", Data: []byte("package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif add(2, 2) != 4 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n")},
		}
		o := run(t, h, Program{Language: lng("go"), Files: files, Entry: "add_test.go", Timeout: 2 * time.Minute})
		if o.res.Phase != PhaseRun || o.res.Exit.Code == 0 || !strings.Contains(o.stdout, "FAIL") {
			t.Errorf("add_test.go against a wrong add: %v\nwant the test to fail", o)
		}
	})
	t.Run("main with a body", func(t *testing.T) {
		needLanguage(t, "rust")
		src := strings.Replace(rust("a - b"), "fn main() {}", "fn main() { println!(\"{}\", add(1, 1)); }", 1)
		o := run(t, h, Program{Language: lng("rust"), Code: []byte(src), Timeout: 2 * time.Minute})
		if o.res.Tests || o.stdout != "0\n" || !slices.ContainsFunc(o.res.Diagnostics, func(d kiln.Diagnostic) bool {
			return d.Severity == "warning" && strings.Contains(d.Message, "were not run")
		}) {
			t.Errorf("%v\ndiagnostics %+v\nwant main run and a warning that the tests were not", o, o.res.Diagnostics)
		}
	})
}

// TestCellHeaders: a cell's C or C++ code finds headers in the workspace,
// also in a folder ("openssl/md5.h"), as a compiler in that folder would.
func TestCellHeaders(t *testing.T) {
	needLanguage(t, "cpp")
	h := newHost(t)
	if err := os.MkdirAll(filepath.Join(h.root, "openssl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.root, "openssl/md5.h"), []byte("#define DIGEST \"d41d8cd9\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "#include <iostream>\n#include \"openssl/md5.h\"\nint main() { std::cout << DIGEST << '\\n'; }\n"
	o := run(t, h, Program{Language: lng("cpp"), Code: []byte(src)})
	if o.res.Phase != PhaseRun || o.stdout != "d41d8cd9\n" {
		t.Errorf("got %v\nwant the header found", o)
	}
}

// TestWarnings: a build that succeeds with warnings keeps them as
// diagnostics, and the program's stderr is its own.
func TestWarnings(t *testing.T) {
	needLanguage(t, "c")
	h := newHost(t)
	src := "#include <stdio.h>\nint main(void) {\n  int unused;\n  fprintf(stderr, \"own\\n\");\n  return 0;\n}\n"
	o := run(t, h, Program{Language: lng("c"), Code: []byte(src)})
	if o.res.Phase != PhaseRun || o.stderr != "own\n" || !hasDiag(o.res.Diagnostics, "warning", "main.c", 3) {
		t.Errorf("got %v\ndiagnostics %+v\nwant a run with stderr \"own\\n\" and a warning at main.c:3", o, o.res.Diagnostics)
	}
}

// TestTracebacksNameTheFile: a cell's interpreter or runtime names its
// source as the user knows it, never the build area.
func TestTracebacksNameTheFile(t *testing.T) {
	h := newHost(t)
	for _, c := range []struct{ lang, name, code, want string }{
		{"ruby", "tool.rb", "puts 1\nraise 'boom'\n", "tool.rb:2"},
		{"php", "main.php", "<?php\necho 1;\nthrow new Exception('boom');\n", "main.php:3"},
		{"go", "main.go", "package main\n\nfunc main() {\n\tpanic(\"boom\")\n}\n", "main.go:4"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			needLanguage(t, c.lang)
			o := run(t, h, Program{Language: lng(c.lang), Code: []byte(c.code), Name: c.name, Timeout: 2 * time.Minute})
			if o.res.Phase != PhaseRun || !strings.Contains(o.stderr, c.want) || strings.Contains(o.stderr, "/.kiln/") {
				t.Errorf("got %v\nwant stderr naming %s and not the build area", o, c.want)
			}
		})
	}
}

// TestRenamer: the path is replaced also when a write splits it, and what
// cannot be part of it is passed on at once.
func TestRenamer(t *testing.T) {
	var out strings.Builder
	r := &renamer{w: &out, old: []byte("/tmp/.kiln/src/ab/main.rb"), new: []byte("main.rb")}
	for _, p := range []string{"at /tmp/.ki", "ln/src/ab/main.rb:3\nprompt> ", "x /tmp/"} {
		r.Write([]byte(p))
	}
	if got := out.String(); got != "at main.rb:3\nprompt> x " {
		t.Errorf("before Flush: %q", got)
	}
	r.Flush()
	if got := out.String(); got != "at main.rb:3\nprompt> x /tmp/" {
		t.Errorf("after Flush: %q", got)
	}
}
