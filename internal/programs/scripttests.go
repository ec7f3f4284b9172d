package programs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"io"
	"path"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Test files of the script languages run with their ecosystem's runner:
// Python's with pytest (Debian's python3-pytest), JavaScript's with
// node --test. A file is a test file by its name (test_*.py, *_test.py,
// *.test.js, *_test.js, ...) or because the caller asked (CellRequest.Test).

var scriptTestName = map[string]*lazyRegexp{
	"python":     lazyRE(`^(?:test_.*|.*_test)\.py$`),
	"javascript": lazyRE(`^.*[._-]test\.[cm]?js$|^test[._-].*\.[cm]?js$`),
}

// IsScriptTest reports whether a cell of language (a script language) runs
// as tests: asked, or by its file's name.
func IsScriptTest(language, name string, asked bool) bool {
	re, ok := scriptTestName[language]
	if !ok {
		return false
	}
	return asked || re.MatchString(path.Base(name))
}

// HasScriptTests reports whether language's test files have a runner here.
func HasScriptTests(language string) bool {
	_, ok := scriptTestName[language]
	return ok
}

// RunScriptTests runs a Python or JavaScript test file with its runner and
// reports each test. p.Entry names the file in the workspace, or p.Code is
// it (written to the build area under p.Name, with the workspace on the
// import path).
func RunScriptTests(ctx context.Context, ex Execer, p Program, stdout, stderr io.Writer) (Result, error) {
	l := p.Language
	if l == nil {
		return Result{}, kiln.Errorf(kiln.Invalid, "no language given for the test file")
	}
	if !HasScriptTests(l.Name) {
		return Result{}, kiln.Errorf(kiln.Invalid, "%s has no test runner here; tests run for Python (pytest), JavaScript (node --test), Go, Rust and Java (JUnit)", l.Name)
	}
	if err := l.Available(); err != nil {
		return Result{}, err
	}
	p = withDefaults(p, l, &Toolchain{})
	root, area := Workspace, BuildArea
	if w, ok := ex.(interface{ WorkspaceDir() string }); ok {
		root = w.WorkspaceDir()
	}
	if a, ok := ex.(interface{ BuildArea() string }); ok {
		area = a.BuildArea()
	}
	for _, f := range p.Files {
		if !local(f.Path) {
			return Result{}, kiln.Errorf(kiln.Invalid, "file %q must be a path inside the workspace", f.Path)
		}
		if err := ex.WriteFile(ctx, f.Path, f.Data, 0o644); err != nil {
			return Result{}, kiln.Wrap(kiln.Invalid, err, "cannot write %s: %v", f.Path, err)
		}
	}
	var b [8]byte
	rand.Read(b[:])
	dir := path.Join(area, "tests", hex.EncodeToString(b[:]))
	defer areaRemove(context.WithoutCancel(ctx), ex, dir)
	files := map[string][]byte{dir + "/": nil}
	file, shown := p.Entry, p.Entry
	if p.Code != nil {
		shown = p.Name
		if shown == "" {
			shown = map[string]string{"python": "test_main.py", "javascript": "main.test.js"}[l.Name]
		}
		if shown != path.Base(shown) || strings.HasPrefix(shown, "-") || strings.HasPrefix(shown, ".") || strings.ContainsAny(shown, "\x00\n\\") {
			return Result{}, kiln.Errorf(kiln.Invalid, "the file name %q must be a plain file name, without a folder", shown)
		}
		file = path.Join(dir, "src", shown)
		files[file] = p.Code
	} else if !local(p.Entry) {
		return Result{}, kiln.Errorf(kiln.Invalid, "the entry %q must be a path inside the workspace", p.Entry)
	}
	if err := areaWrite(ctx, ex, files); err != nil {
		return Result{}, err
	}
	junit := path.Join(dir, "junit.xml")
	var argv, env []string
	switch l.Name {
	case "python":
		// -p no:cacheprovider: nothing written into the workspace;
		// PYTHONPATH: a test in the build area imports the workspace's code.
		argv = []string{l.Binary, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--junitxml=" + junit, "--", file}
		env = []string{"PYTHONPATH=" + root, "PYTHONDONTWRITEBYTECODE=1"}
	case "javascript":
		argv = []string{l.Binary, "--test", "--test-reporter=tap", "--", file}
	}
	var testLog boundedBuffer
	testLog.max = maxTestLog
	out := io.Writer(io.MultiWriter(stdout, &testLog))
	if p.Code != nil {
		o := &renamer{w: out, old: []byte(file), new: []byte(shown)}
		e := &renamer{w: stderr, old: []byte(file), new: []byte(shown)}
		defer e.Flush()
		out, stderr = o, e
		defer o.Flush()
	}
	info, err := ex.Exec(ctx, protocol.Exec{Argv: append(argv, p.Args...), Env: env, Stdin: p.Stdin,
		TimeoutMs: p.Timeout.Milliseconds(), OutputBytes: p.OutputBytes}, out, stderr)
	if err != nil {
		return Result{}, sandboxErr(ctx, err, "run the tests of %s", shown)
	}
	if f, ok := out.(interface{ Flush() }); ok {
		f.Flush()
	}
	res := Result{Phase: PhaseRun, Tests: true, Exit: info}
	switch l.Name {
	case "python":
		if data, ok, err := areaRead(ctx, ex, junit); err == nil && ok {
			res.TestCases = parseJUnit(data)
		}
		if info.Code == 5 && len(res.TestCases) == 0 {
			res.Diagnostics = append(res.Diagnostics, kiln.Diagnostic{File: shown, Severity: "warning",
				Message: "pytest found no tests: name them test_* (functions) or Test* (classes)"})
		}
	case "javascript":
		res.TestCases = parseTAP(testLog.String())
	}
	return res, nil
}

// junitSuites is the part of a JUnit XML report that is read.
type junitSuites struct {
	Cases []junitCase `xml:"testsuite>testcase"`
}

type junitMsg struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// parseJUnit reads pytest's --junitxml report.
func parseJUnit(data []byte) []kiln.TestCase {
	var s junitSuites
	if xml.Unmarshal(data, &s) != nil {
		return nil
	}
	var cases []kiln.TestCase
	for _, c := range s.Cases {
		name := c.Name
		if c.Class != "" {
			name = c.Class + "::" + c.Name
		}
		cases = append(cases, c.testCase(name))
	}
	return bound(cases)
}

var (
	tapLine  = lazyRE(`^(\s*)(not ok|ok) \d+ - (.*?)(?:\s+#\s*(SKIP|TODO)\b.*)?$`)
	tapError = lazyRE(`^\s+error: (.*)$`)
)

// parseTAP reads node --test's TAP report: each "ok"/"not ok" line, a
// subtest's indented, and a failure's error from its YAML block.
func parseTAP(out string) []kiln.TestCase {
	var cases []kiln.TestCase
	last := -1
	for _, line := range strings.Split(out, "\n") {
		if m := tapLine.FindStringSubmatch(line); m != nil {
			tc := kiln.TestCase{Name: m[3], Status: "passed"}
			switch {
			case m[4] != "":
				tc.Status = "skipped"
			case m[2] == "not ok":
				tc.Status = "failed"
			}
			cases = append(cases, tc)
			last = len(cases) - 1
			continue
		}
		if m := tapError.FindStringSubmatch(line); m != nil && last >= 0 && cases[last].Status == "failed" && cases[last].Message == "" {
			cases[last].Message = clip(strings.Trim(m[1], `'"|>-`))
		}
	}
	return bound(cases)
}
