package server_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// TestProgramCellsThroughTheAPI: a compiled cell names its file and leaves
// the user's own main.c alone; a cell with an entry builds the user's
// project of several files as it is in the workspace.
func TestProgramCellsThroughTheAPI(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("ada")
	s, err := c.CreateSession(ctx, client.SessionRequest{Languages: []string{"c"}})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"main.c": "#include \"util.h\"\nint main(void) { return twice(21) == 42 ? 0 : 1; }\n",
		"util.h": "int twice(int n);\n",
		"util.c": "#include <stdio.h>\nint twice(int n) { printf(\"project\\n\"); return 2 * n; }\n",
	}
	for name, data := range files {
		if _, err := c.Upload(ctx, s.ID, name, strings.NewReader(data), true); err != nil {
			t.Fatal(err)
		}
	}
	x, err := c.Exec(ctx, s.ID, client.ExecRequest{Language: "c", FileName: "sol.c", Code: "int main(void) {\n  return y;\n}\n"})
	if err != nil {
		t.Fatal(err)
	}
	if r := x.Result; r == nil || r.Error == nil || len(r.Error.Diagnostics) == 0 || r.Error.Diagnostics[0].File != "sol.c" || r.Error.Diagnostics[0].Line != 2 {
		t.Errorf("a broken sol.c: %+v; want a compile error at sol.c:2", x.Result)
	}
	x, err = c.Exec(ctx, s.ID, client.ExecRequest{Language: "c", Entry: "main.c"})
	if err != nil {
		t.Fatal(err)
	}
	if r := x.Result; r == nil || r.Status != "ok" || r.Stdout != "project\n" || len(r.Artifacts) != 0 {
		t.Errorf("the project by its entry: %+v; want it built from main.c and util.c, printing project, no artifact", x.Result)
	}
	var got strings.Builder
	if _, err := c.Download(ctx, s.ID, "main.c", &got); err != nil || got.String() != files["main.c"] {
		t.Errorf("the user's main.c is %q (%v); want it unchanged", got.String(), err)
	}
}

// TestRunKeepsTheFileName: a one-shot run of test.java with public class
// HelloWorld runs, as "java test.java" does, when the request names the
// file; its source is not returned as a file the run wrote.
func TestRunKeepsTheFileName(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("ada")
	src := "public class HelloWorld {\n    public static void main(String[] args) {\n        System.out.println(\"hello\");\n    }\n}\n"
	res, err := c.Run(ctx, client.RunRequest{Language: "java", Code: src, FileName: "test.java"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Result.Status != "ok" || res.Result.Stdout != "hello\n" || len(res.Files) != 0 {
		t.Errorf("result %+v, files %d; want hello and no file written", res.Result, len(res.Files))
	}
}

// TestRunRichOutputs: POST /v1/run answers the same CellResult for the
// program of cmd/kiln's TestRunJSONIsTheAPIsCellResult as kiln run --json:
// stdout, the display() as a rich output, and the file as an artifact.
func TestRunRichOutputs(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	const program = `class Bold:
    def _repr_html_(self):
        return "<b>hi</b>"
    def __repr__(self):
        return "Bold()"
print("before")
display(Bold())
with open("out.txt", "w") as f:
    f.write("x")
`
	res, err := e.user("ada").Run(ctx, client.RunRequest{Language: "python", Code: program})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Result
	if r.Status != "ok" || r.Language != "python" || r.Stdout != "before\n" {
		t.Errorf("result %+v; want ok, python, stdout before", r)
	}
	if len(r.Outputs) != 1 || htmlOf(r.Outputs[0].Data) != "<b>hi</b>" {
		t.Errorf("outputs %+v; want the one display() as text/html", r.Outputs)
	}
	if len(r.Artifacts) != 1 || r.Artifacts[0].Path != "out.txt" || r.Artifacts[0].Change != "created" {
		t.Errorf("artifacts %+v; want out.txt created", r.Artifacts)
	}
}

// TestRunScriptArgs: a one-shot Python run takes arguments as a script
// does (sys.argv) and ends with sys.exit()'s status; a kernel language
// without a script form refuses them, saying which languages take them.
func TestRunScriptArgs(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	ada := e.user("ada")
	res, err := ada.Run(ctx, client.RunRequest{Language: "python", Code: "import sys\nprint(sys.argv)\nsys.exit(3)", Args: []string{"a", "b c"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Result; r.Stdout != "['main.py', 'a', 'b c']\n" || r.ExitCode == nil || *r.ExitCode != 3 || r.Error != nil {
		t.Errorf("result %+v (exit code %v); want the argv printed, exit code 3, no error", r, r.ExitCode)
	}
	_, err = ada.Run(ctx, client.RunRequest{Language: "sql", Code: "select 1", Args: []string{"a"}})
	if err == nil || !strings.Contains(err.Error(), "takes no arguments") || !strings.Contains(err.Error(), "python") {
		t.Errorf("sql with arguments: %v; want a refusal that names the languages that take them", err)
	}
}

func htmlOf(data map[string]json.RawMessage) string {
	var s string
	json.Unmarshal(data["text/html"], &s)
	return s
}

// TestBuildOptionsThroughTheAPI: build_options reach the compiler of a
// one-shot run and of a session cell; a refused flag is a 400 that names it.
func TestBuildOptionsThroughTheAPI(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("ada")
	code := "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", V); return 0; }\n"
	res, err := c.Run(ctx, client.RunRequest{Language: "c", Code: code, BuildOptions: []string{"-O2", "-DV=7"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Result.Status != "ok" || res.Result.Stdout != "7\n" {
		t.Errorf("run with -DV=7: %+v; want 7", res.Result)
	}
	_, err = c.Run(ctx, client.RunRequest{Language: "c", Code: code, BuildOptions: []string{"-fplugin=/tmp/x.so"}})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 400 || !strings.Contains(p.Detail, "-fplugin=/tmp/x.so") || !strings.Contains(p.Detail, "allowed") {
		t.Errorf("run with -fplugin: %v; want a 400 naming the flag and what is allowed", err)
	}
	s, err := c.CreateSession(ctx, client.SessionRequest{Languages: []string{"c"}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Exec(ctx, s.ID, client.ExecRequest{Language: "c", Code: code, BuildOptions: []string{"-D", "V=3"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := x.Result; r == nil || r.Status != "ok" || r.Stdout != "3\n" {
		t.Errorf("cell with -D V=3: %+v; want 3", x.Result)
	}
	if _, err := c.Exec(ctx, s.ID, client.ExecRequest{Language: "c", Code: code, BuildOptions: []string{"-o", "/etc/x"}}); !errors.As(err, &p) || p.Status != 400 {
		t.Errorf("cell with -o: %v; want a 400", err)
	}
}

// TestRunReportsTests: a one-shot run of Rust #[test]s beside an empty
// main answers each test's outcome in result.tests.
func TestRunReportsTests(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	src := "fn add(a: i32, b: i32) -> i32 { a - b }\n\nfn main() {}\n\n#[test]\nfn adds() { assert_eq!(add(2, 2), 4); }\n\n#[test]\nfn zero() { assert_eq!(add(0, 0), 0); }\n"
	res, err := e.user("ada").Run(ctx, client.RunRequest{Language: "rust", Code: src, FileName: "sol.rs"})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Result.Tests
	if r == nil || r.Passed != 1 || r.Failed != 1 || len(r.Cases) != 2 {
		t.Fatalf("result %+v; want tests with one passed and one failed", res.Result)
	}
	for _, c := range r.Cases {
		if want := map[string]string{"adds": "failed", "zero": "passed"}[c.Name]; c.Status != want {
			t.Errorf("test %s: %s; want %s", c.Name, c.Status, want)
		}
	}
}

// TestRunPytest: a one-shot run of a pytest file (found by its name, or
// asked for with test) lists each test; a session cell does the same.
func TestRunPytest(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-m", "pytest", "--version").Run() != nil {
		t.Skip("needs pytest: Debian's python3-pytest, which scripts/deps installs")
	}
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("ada")
	src := "def test_good():\n    assert 1 + 1 == 2\n\ndef test_bad():\n    assert 1 + 1 == 3\n"
	for _, req := range []client.RunRequest{
		{Language: "python", Code: src, FileName: "test_sol.py"},
		{Language: "python", Code: src, FileName: "checks.py", Test: true},
	} {
		res, err := c.Run(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r := res.Result.Tests; r == nil || r.Passed != 1 || r.Failed != 1 || res.Result.Status != "error" {
			t.Errorf("run %s (test %v): %+v; want one passed and one failed test, status error", req.FileName, req.Test, res.Result)
		}
	}
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Exec(ctx, s.ID, client.ExecRequest{Code: src, Test: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := x.Result; r == nil || r.Tests == nil || r.Tests.Failed != 1 {
		t.Errorf("a session cell with test: %+v; want one failed test", x.Result)
	}
}
