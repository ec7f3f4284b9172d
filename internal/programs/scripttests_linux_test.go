package programs

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestScriptTests: a pytest file and a node --test file report each test,
// a failure with its message; the pytest file imports the workspace's
// code and writes nothing into the workspace.
func TestScriptTests(t *testing.T) {
	sb := newSandbox(t, newBackend(t), native.Spec{})
	ignoreMsg := cmpopts.IgnoreFields(kiln.TestCase{}, "Message")
	t.Run("pytest", func(t *testing.T) {
		if exec.Command("/usr/bin/python3", "-m", "pytest", "--version").Run() != nil {
			t.Skip("needs pytest: Debian's python3-pytest, which scripts/deps installs")
		}
		src := "import pytest\nfrom sol import add\n\n" +
			"def test_good():\n    assert add(2, 2) == 4\n\n" +
			"def test_bad():\n    assert add(1, 1) == 3\n\n" +
			"@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n"
		if err := sb.Agent.WriteFile(t.Context(), "sol.py", []byte("def add(a, b):\n    return a + b\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr strings.Builder
		res, err := RunScriptTests(t.Context(), sb.Agent, Program{Language: lng("python"), Code: []byte(src), Name: "test_sol.py"}, &stdout, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		want := []kiln.TestCase{
			{Name: "test_sol::test_good", Status: "passed"},
			{Name: "test_sol::test_bad", Status: "failed"},
			{Name: "test_sol::test_later", Status: "skipped"},
		}
		if !res.Tests || res.Exit.Code != 1 || !cmp.Equal(res.TestCases, want, ignoreMsg) {
			t.Errorf("pytest: %+v\nstdout %q\nstderr %q\nwant %v", res, stdout.String(), stderr.String(), want)
		}
		if len(res.TestCases) == 3 && !strings.Contains(res.TestCases[1].Message, "assert") {
			t.Errorf("test_bad's message %q; want the assertion", res.TestCases[1].Message)
		}
		list, err := sb.Agent.List(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range list {
			if f.Name != "sol.py" {
				t.Errorf("the workspace has %s after the tests; want only sol.py", f.Name)
			}
		}
	})
	t.Run("node", func(t *testing.T) {
		needLanguage(t, "javascript")
		src := "const test = require('node:test');\nconst assert = require('node:assert');\n\n" +
			"test('adds', () => { assert.strictEqual(1 + 1, 2); });\n" +
			"test('breaks', () => { assert.strictEqual(1 + 1, 3); });\n" +
			"test('later', { skip: true }, () => {});\n"
		var stdout, stderr strings.Builder
		res, err := RunScriptTests(t.Context(), sb.Agent, Program{Language: lng("javascript"), Code: []byte(src), Name: "sol.test.js"}, &stdout, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		want := []kiln.TestCase{
			{Name: "adds", Status: "passed"},
			{Name: "breaks", Status: "failed"},
			{Name: "later", Status: "skipped"},
		}
		if !res.Tests || res.Exit.Code == 0 || !cmp.Equal(res.TestCases, want, ignoreMsg) {
			t.Errorf("node --test: %+v\nstdout %q\nstderr %q\nwant %v", res, stdout.String(), stderr.String(), want)
		}
	})
}
