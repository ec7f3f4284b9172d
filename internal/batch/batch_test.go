package batch

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

func ptr[T any](v T) *T { return &v }

func TestJudge(t *testing.T) {
	ok := kiln.CellResult{Status: kiln.StatusOK, Stdout: "42\n", ExitCode: ptr(0)}
	for _, tc := range []struct {
		name   string
		check  Check
		res    kiln.CellResult
		passed bool
		reason Reason
	}{
		{"exact stdout", Check{Stdout: ptr("42\n")}, ok, true, ""},
		{"exact stdout differs by a newline", Check{Stdout: ptr("42")}, ok, false, WrongAnswer},
		{"trimmed stdout", Check{Stdout: ptr("42"), Trim: true}, kiln.CellResult{Status: kiln.StatusOK, Stdout: "42  \n\n"}, true, ""},
		{"trim keeps leading space", Check{Stdout: ptr("42"), Trim: true}, kiln.CellResult{Status: kiln.StatusOK, Stdout: " 42\n"}, false, WrongAnswer},
		{"wrong stdout", Check{Stdout: ptr("41\n")}, ok, false, WrongAnswer},
		{"exit code 0 by default", Check{}, ok, true, ""},
		{"expected exit code", Check{ExitCode: ptr(3)}, kiln.CellResult{Status: kiln.StatusError, ExitCode: ptr(3), Error: &kiln.CellError{Name: "ExitStatus"}}, true, ""},
		{"other exit code asked for", Check{ExitCode: ptr(3)}, ok, false, WrongAnswer},
		{"program crashed", Check{Stdout: ptr("42\n")}, kiln.CellResult{Status: kiln.StatusError, ExitCode: ptr(139), Error: &kiln.CellError{Name: "ExitStatus", Message: "killed by SIGSEGV"}}, false, RuntimeError},
		{"python exception", Check{}, kiln.CellResult{Status: kiln.StatusError, Error: &kiln.CellError{Name: "ZeroDivisionError", Message: "division by zero"}}, false, RuntimeError},
		{"failed assertion of the test", Check{Test: "assert f() == 2"}, kiln.CellResult{Status: kiln.StatusError, Error: &kiln.CellError{Name: "AssertionError"}}, false, WrongAnswer},
		{"exception in the test is the program's", Check{Test: "assert f() == 2"}, kiln.CellResult{Status: kiln.StatusError, Error: &kiln.CellError{Name: "NameError", Message: "name 'f' is not defined"}}, false, RuntimeError},
		{"test passes", Check{Test: "assert f() == 2"}, kiln.CellResult{Status: kiln.StatusOK}, true, ""},
		{"C assert of the test", Check{Test: "int main() { assert(f(2) == 4); }"}, kiln.CellResult{Status: kiln.StatusError, ExitCode: ptr(134), Stderr: "main: main.c:5: main: Assertion `f(2) == 4' failed.\n", Error: &kiln.CellError{Name: "ExitStatus", Message: "killed by SIGABRT"}}, false, WrongAnswer},
		{"C crash in the test is the program's", Check{Test: "int main() { f(2); }"}, kiln.CellResult{Status: kiln.StatusError, ExitCode: ptr(139), Error: &kiln.CellError{Name: "ExitStatus", Message: "killed by SIGSEGV"}}, false, RuntimeError},
		{"failed test of the runner", Check{Test: "func TestF(t *testing.T) {}"}, kiln.CellResult{Status: kiln.StatusError, ExitCode: ptr(1), Error: &kiln.CellError{Name: "ExitStatus"},
			Tests: &kiln.TestReport{Failed: 1, Cases: []kiln.TestCase{{Name: "TestF", Status: "failed", Message: "got 3"}}}}, false, WrongAnswer},
		{"Java AssertionError of the test", Check{Test: "class Main {}"}, kiln.CellResult{Status: kiln.StatusError, ExitCode: ptr(1), Stderr: "Exception in thread \"main\" java.lang.AssertionError\n\tat Main.main(Main.java:9)\n", Error: &kiln.CellError{Name: "ExitStatus"}}, false, WrongAnswer},
		{"assertion text without a test program", Check{}, kiln.CellResult{Status: kiln.StatusError, ExitCode: ptr(134), Stderr: "Assertion `x' failed.\n", Error: &kiln.CellError{Name: "ExitStatus"}}, false, RuntimeError},
		{"compile error", Check{Stdout: ptr("")}, kiln.CellResult{Status: kiln.StatusError, Error: &kiln.CellError{Name: "CompileError", Diagnostics: []kiln.Diagnostic{{Message: "x"}}}}, false, CompileError},
		{"python syntax error", Check{}, kiln.CellResult{Status: kiln.StatusError, Error: &kiln.CellError{Name: "SyntaxError"}}, false, CompileError},
		{"timeout", Check{Stdout: ptr("42\n")}, kiln.CellResult{Status: kiln.StatusTimeout, Stdout: "42\n"}, false, Timeout},
		{"memory", Check{}, kiln.CellResult{Status: kiln.StatusMemory}, false, Memory},
		{"output limit", Check{}, kiln.CellResult{Status: kiln.StatusOutput}, false, OutputLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.check, tc.res)
			if v.Passed != tc.passed || v.Reason != tc.reason {
				t.Errorf("Judge = %+v, want passed=%v reason=%q", v, tc.passed, tc.reason)
			}
			if !v.Passed && v.Detail == "" {
				t.Errorf("a failure without detail: %+v", v)
			}
		})
	}
}

func TestWrongAnswerSaysWhere(t *testing.T) {
	v := Judge(Check{Stdout: ptr("1\n2\n3\n")}, kiln.CellResult{Status: kiln.StatusOK, Stdout: "1\n5\n3\n"})
	if !strings.Contains(v.Detail, "line 2") || !strings.Contains(v.Detail, `"5"`) {
		t.Errorf("detail = %q, want the first differing line", v.Detail)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		it   Item
		want string // in the error; empty: valid
	}{
		{Item{Language: "python", Code: "print(1)", Check: Check{Test: "assert True"}}, ""},
		{Item{Language: "javascript", Code: "1", Check: Check{Test: "1"}}, ""},
		{Item{Language: "c", Code: "int main(){}", Check: Check{Stdout: ptr("")}}, ""},
		{Item{Code: "x"}, "language is missing"},
		{Item{Language: "cobol", Code: "x"}, "item 3"},
		{Item{Language: "c", Code: "x", Check: Check{Test: "x"}}, ""},
		{Item{Language: "go", Code: "x", Check: Check{Test: "x"}}, ""},
		{Item{Language: "php", Code: "x", Check: Check{Test: "x"}}, "a test program is supported for"},
		{Item{Language: "python", Code: "x", Check: Check{Test: "x", Stdout: ptr("")}}, "not both"},
		{Item{ID: strings.Repeat("a", MaxIDBytes+1), Language: "python", Code: "x"}, "at most"},
	} {
		err := Validate(3, tc.it)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", tc.it, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Validate(%+v) = %v, want an error with %q", tc.it, err, tc.want)
		}
	}
}

func TestCodeRunsTheTestAfterTheSolution(t *testing.T) {
	got := ProgramOf(Item{Language: "python", Code: "def f():\n    return 2", Check: Check{Test: "assert f() == 2\n"}})
	if want := "def f():\n    return 2\n\nassert f() == 2\n"; got.Code != want || got.Name != "" || got.Test {
		t.Errorf("ProgramOf = %+v, want code %q", got, want)
	}
}

// TestProgramOfCompiled: a compiled language's test program joins its
// solution as HumanEval-X runs them: appended for C, C++ and Rust (Rust
// #[test]s as tests), appended with the imports on top and one public
// class for Java (@Test methods with JUnit), a _test.go beside the
// solution for Go, each with a package clause.
func TestProgramOfCompiled(t *testing.T) {
	cpp := ProgramOf(Item{Language: "c++", Code: "int f(int x) { return 2 * x; }\n", Check: Check{Test: "#include <cassert>\nint main() { assert(f(2) == 4); }\n"}})
	if want := "int f(int x) { return 2 * x; }\n\n#include <cassert>\nint main() { assert(f(2) == 4); }\n"; cpp.Code != want || cpp.Test || len(cpp.Files) != 0 {
		t.Errorf("C++: %+v, want code %q", cpp, want)
	}
	rs := ProgramOf(Item{Language: "rust", Code: "fn f() -> i32 { 2 }\nfn main() {}", Check: Check{Test: "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn two() { assert_eq!(f(), 2); }\n}\n"}})
	if !rs.Test || !strings.HasPrefix(rs.Code, "fn f() -> i32 { 2 }\nfn main() {}\n\n#[cfg(test)]") {
		t.Errorf("Rust: %+v, want the test appended, as tests", rs)
	}
	if rs := ProgramOf(Item{Language: "rust", Code: "fn f() -> i32 { 2 }", Check: Check{Test: "fn main() { assert_eq!(f(), 2); }"}}); rs.Test {
		t.Errorf("Rust with a main as its test: %+v, want its main run, not tests", rs)
	}
	java := ProgramOf(Item{Language: "java", Code: "package p;\nimport java.util.*;\npublic class Solution {\n    int f() { return 2; }\n}\n",
		Check: Check{Test: "import java.util.List;\n\npublic class Main {\n    public static void main(String[] a) { if (new Solution().f() != 2) throw new AssertionError(); }\n}\n"}})
	wantJava := "package p;\nimport java.util.List;\n\nimport java.util.*;\nclass Solution {\n    int f() { return 2; }\n}\n\npublic class Main {\n    public static void main(String[] a) { if (new Solution().f() != 2) throw new AssertionError(); }\n}\n"
	if java.Code != wantJava || java.Test {
		t.Errorf("Java:\n%s\nwant\n%s", java.Code, wantJava)
	}
	if j := ProgramOf(Item{Language: "java", Code: "class Solution { int f() { return 2; } }", Check: Check{Test: "import org.junit.Test;\npublic class SolutionTest { @Test public void two() {} }"}}); !j.Test {
		t.Errorf("Java with @Test: %+v, want it run as tests", j)
	}
	goItem := Item{Language: "go", Code: "func Double(x int) int { return 2 * x }\n", Files: []File{{Path: "data.txt"}},
		Check: Check{Test: "import \"testing\"\n\nfunc TestDouble(t *testing.T) {}\n"}}
	g := ProgramOf(goItem)
	if g.Name != "main_test.go" || !g.Test || g.Code != "package main\n\nimport \"testing\"\n\nfunc TestDouble(t *testing.T) {}\n" ||
		len(g.Files) != 2 || g.Files[1].Path != "main.go" || string(g.Files[1].Content) != "package main\n\nfunc Double(x int) int { return 2 * x }\n" {
		t.Errorf("Go: %+v", g)
	}
	if len(goItem.Files) != 1 {
		t.Errorf("ProgramOf changed the item's files: %+v", goItem.Files)
	}
	goItem.Code, goItem.FileName = "package calc\n\nfunc Double(x int) int { return 2 * x }\n", "calc.go"
	if g := ProgramOf(goItem); g.Name != "calc_test.go" || !strings.HasPrefix(g.Code, "package calc\n") || g.Files[1].Path != "calc.go" {
		t.Errorf("Go in package calc: %+v", g)
	}
}

func TestTrimBoundsOutputs(t *testing.T) {
	big := strings.Repeat("é", MaxOutputBytes)
	res := Trim(kiln.CellResult{Stdout: big, Stderr: big, Error: &kiln.CellError{Message: big}})
	for _, s := range []string{res.Stdout, res.Stderr, res.Error.Message} {
		if len(s) > MaxOutputBytes+len("…") || !strings.HasSuffix(s, "…") {
			t.Errorf("output of %d bytes not cut to %d", len(s), MaxOutputBytes)
		}
	}
}
