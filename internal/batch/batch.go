// Package batch judges generated programs: an item is a one-shot run and a
// check, its result a verdict with the reason. It holds the rules of an
// item and of judging, and nothing of running: the service runs items
// through its one-shot path (queue, limits, quotas, audit) and keeps them
// in the store.
package batch

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// Bounds of a batch, documented in the API.
const (
	MaxItems       = 5000      // items in one batch
	MaxIDBytes     = 200       // an item's own id
	MaxOutputBytes = 64 * 1024 // stdout and stderr kept per item result, each
)

// File is a file of an item's program, copied into its sandbox.
type File struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Mode    uint32 `json:"mode,omitempty"`
}

// Item is one program to run and judge, in a fresh sandbox.
type Item struct {
	// ID is the caller's name for the item, echoed in its result; empty:
	// its index.
	ID       string   `json:"id,omitempty"`
	Language string   `json:"language"`
	Code     string   `json:"code"`
	FileName string   `json:"file_name,omitempty"` // a program language's entry file
	Files    []File   `json:"files,omitempty"`
	Stdin    string   `json:"stdin,omitempty"`
	Args     []string `json:"args,omitempty"`
	// BuildOptions are a compiled language's compiler and linker flags,
	// as a one-shot run's.
	BuildOptions []string    `json:"build_options,omitempty"`
	Limits       kiln.Limits `json:"-"` // the wire form is the API's limits object
	Check        Check       `json:"check"`
	// Packages (with PackageManager: pip or npm, default the language's)
	// are installed in the item's sandbox before it runs, under Network,
	// the batch's network policy, as a one-shot run's.
	Packages       []string            `json:"packages,omitempty"`
	PackageManager string              `json:"package_manager,omitempty"`
	Network        *kiln.NetworkPolicy `json:"network,omitempty"`
}

// Check is how an item's run is judged. Exactly one of Stdout and Test
// may be set; ExitCode may go with either, and is 0 when nothing is set.
type Check struct {
	// ExitCode is the expected exit status; nil: 0 (for a REPL language
	// the cell must end without an error).
	ExitCode *int `json:"exit_code,omitempty"`
	// Stdout is the expected standard output, exact, or after trimming
	// trailing whitespace on every line and at the end when Trim is set.
	Stdout *string `json:"stdout,omitempty"`
	Trim   bool    `json:"trim,omitempty"`
	// Test is a test program run after the solution in the same sandbox
	// (assert-style, as HumanEval, MBPP and HumanEval-X): for a REPL
	// language (Python, JavaScript, TypeScript) in the same kernel, after
	// the solution's code; for a compiled language as Program says. A
	// failed assertion or test is a wrong answer, another error a runtime
	// error.
	Test string `json:"test,omitempty"`
}

// Reason says why an item failed.
type Reason string

const (
	WrongAnswer  Reason = "wrong_answer"
	RuntimeError Reason = "runtime_error"
	CompileError Reason = "compile_error"
	Timeout      Reason = "timeout"
	Memory       Reason = "memory"
	OutputLimit  Reason = "output_limit"
	// Rejected: kiln refused to run the item (a limit over the caps, a
	// runtime not installed); the detail says why.
	Rejected Reason = "rejected"
)

// Verdict is the judgement of one item's run.
type Verdict struct {
	Passed bool   `json:"passed"`
	Reason Reason `json:"reason,omitempty"`
	// Detail says in plain words what differed or failed.
	Detail string `json:"detail,omitempty"`
}

// Validate checks an item before anything runs; the error names the item
// and says what is wrong and what is allowed.
func Validate(i int, it Item) error {
	name := fmt.Sprintf("item %d", i)
	if it.ID != "" {
		name = fmt.Sprintf("item %d (%q)", i, it.ID)
	}
	if len(it.ID) > MaxIDBytes || !utf8.ValidString(it.ID) {
		return kiln.Errorf(kiln.Invalid, "%s: id must be valid UTF-8 of at most %d bytes", name, MaxIDBytes)
	}
	if it.Language == "" {
		return kiln.Errorf(kiln.Invalid, "%s: language is missing", name)
	}
	l, err := lang.Lookup(it.Language)
	if err != nil {
		return kiln.Errorf(kiln.Invalid, "%s: %s", name, kiln.Message(err))
	}
	if it.Check.Stdout != nil && it.Check.Test != "" {
		return kiln.Errorf(kiln.Invalid, "%s: a check has either stdout or test, not both", name)
	}
	if it.Check.Test != "" && !slices.Contains(TestLanguages(), l.Name) {
		return kiln.Errorf(kiln.Invalid, "%s: a test program is supported for %s; for %s, check stdout or the exit code",
			name, strings.Join(TestLanguages(), ", "), l.Name)
	}
	return nil
}

// TestLanguages are the languages whose items may carry a test program:
// those that run in a kernel, where the test runs after the solution,
// and the compiled languages that Program joins a test to.
func TestLanguages() []string {
	var out []string
	for _, l := range lang.All() {
		if l.Kind == lang.REPL && l.RunsOneShot || joined[l.Name] != nil {
			out = append(out, l.Name)
		}
	}
	return out
}

// Judge decides an item from its run's result.
func Judge(c Check, res kiln.CellResult) Verdict {
	switch res.Status {
	case kiln.StatusTimeout:
		return fail(Timeout, "the time limit was reached")
	case kiln.StatusMemory:
		return fail(Memory, "the memory limit was reached")
	case kiln.StatusOutput:
		return fail(OutputLimit, "the output limit was reached")
	case kiln.StatusInterrupted:
		return fail(RuntimeError, "the run was interrupted")
	}
	if res.Error != nil && isCompileError(res.Error) {
		return fail(CompileError, runtimeDetail(res, 1))
	}
	want := 0
	if c.ExitCode != nil {
		want = *c.ExitCode
	}
	got := exitCode(res)
	if got != want {
		// A failed assertion or test of the test program is a wrong
		// answer; any other failure is the program's own.
		if c.Test != "" {
			if why, ok := failedCheck(res); ok {
				return fail(WrongAnswer, why)
			}
		}
		// A program that exits with another status than the one asked
		// for answered wrongly; a crash when success was expected is a
		// runtime error.
		if want != 0 && (res.Error == nil || res.Error.Name == "ExitStatus") {
			return fail(WrongAnswer, fmt.Sprintf("exit code %d, expected %d", got, want))
		}
		return fail(RuntimeError, runtimeDetail(res, got))
	}
	if c.Stdout != nil {
		gotOut, wantOut := res.Stdout, *c.Stdout
		if c.Trim {
			gotOut, wantOut = TrimTrailing(gotOut), TrimTrailing(wantOut)
		}
		if gotOut != wantOut {
			return fail(WrongAnswer, diff(gotOut, wantOut))
		}
	}
	return Verdict{Passed: true}
}

func fail(r Reason, detail string) Verdict { return Verdict{Reason: r, Detail: detail} }

// assertionLine finds a failed assertion in a compiled test program's
// stderr: C's assert ("Assertion `f(2) == 4' failed."), Rust's assert!
// and assert_eq! panics ("assertion failed", "assertion `left == right`
// failed"), Java's AssertionError and JUnit 5's AssertionFailedError.
var assertionLine = regexp.MustCompile(`(?m)^.*(?:\b[Aa]ssertion\b.*\bfailed\b|AssertionError|AssertionFailedError).*$`)

// failedCheck says which check of a test program failed: a kernel's
// AssertionError, a test that the runner reported failed (go test, Rust's
// harness, JUnit), or an assertion in a compiled program's stderr.
func failedCheck(res kiln.CellResult) (string, bool) {
	if res.Error != nil && res.Error.Name == "AssertionError" {
		if m := firstLine(res.Error.Message); m != "" {
			return "assertion failed: " + m, true
		}
		return "assertion failed", true
	}
	if res.Tests != nil && res.Tests.Failed > 0 {
		for _, tc := range res.Tests.Cases {
			if tc.Status == "failed" {
				if m := firstLine(tc.Message); m != "" {
					return fmt.Sprintf("test %s failed: %s", cut(tc.Name, 200), m), true
				}
				return fmt.Sprintf("test %s failed", cut(tc.Name, 200)), true
			}
		}
	}
	if m := assertionLine.FindString(res.Stderr); m != "" {
		return "assertion failed: " + firstLine(m), true
	}
	return "", false
}

// exitCode is the run's status as a number: its exit code, else 1 for an
// error (a kernel's exception), else 0.
func exitCode(res kiln.CellResult) int {
	switch {
	case res.ExitCode != nil:
		return *res.ExitCode
	case res.Error != nil || res.Status == kiln.StatusError:
		return 1
	}
	return 0
}

// isCompileError tells a failed build from a failed run: the build's
// error carries its diagnostics, and the kernels' syntax errors are named.
func isCompileError(e *kiln.CellError) bool {
	switch e.Name {
	case "CompileError", "SyntaxError", "IndentationError", "TabError":
		return true
	}
	return len(e.Diagnostics) > 0
}

func runtimeDetail(res kiln.CellResult, code int) string {
	if res.Error != nil {
		msg := res.Error.Name
		if m := firstLine(res.Error.Message); m != "" {
			msg += ": " + m
		}
		return msg
	}
	return fmt.Sprintf("exit code %d", code)
}

// TrimTrailing removes trailing whitespace from every line and trailing
// newlines at the end, so "1 \n2\n\n" and "1\n2" compare equal.
func TrimTrailing(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r\f\v")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// diff says where two outputs first differ, by line.
func diff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("line %d: got %q, expected %q", i+1, cut(gl, 80), cut(wl, 80))
		}
	}
	return "the outputs differ"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return cut(s, 200)
}

// cut shortens s to at most n bytes without splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Trim cuts a result's outputs to MaxOutputBytes each and drops what a
// judge has no use for (rich outputs and artifacts), so that thousands of
// results stay small in the store and on the wire.
func Trim(res kiln.CellResult) kiln.CellResult {
	res.Stdout = cut(res.Stdout, MaxOutputBytes)
	res.Stderr = cut(res.Stderr, MaxOutputBytes)
	res.Outputs = nil
	res.Artifacts = nil
	if res.Error != nil {
		e := *res.Error
		e.Message = cut(e.Message, MaxOutputBytes)
		if len(e.Traceback) > 50 {
			e.Traceback = e.Traceback[len(e.Traceback)-50:]
		}
		if len(e.Diagnostics) > 50 {
			e.Diagnostics = e.Diagnostics[:50]
		}
		res.Error = &e
	}
	return res
}
