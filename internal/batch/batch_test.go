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
		{Item{Language: "c", Code: "x", Check: Check{Test: "x"}}, "a test program is supported for"},
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
	got := Code(Item{Code: "def f():\n    return 2", Check: Check{Test: "assert f() == 2\n"}})
	if want := "def f():\n    return 2\n\nassert f() == 2\n"; got != want {
		t.Errorf("Code = %q, want %q", got, want)
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
