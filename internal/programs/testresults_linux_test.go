package programs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestTestResults: a Go _test.go file and Rust #[test]s beside an empty
// main report each test's outcome, structured, with a failure's message.
func TestTestResults(t *testing.T) {
	sb := newSandbox(t, newBackend(t), native.Spec{})
	ignoreMsg := cmpopts.IgnoreFields(kiln.TestCase{}, "Message")
	t.Run("go", func(t *testing.T) {
		needLanguage(t, "go")
		src := "package main\n\nimport \"testing\"\n\n" +
			"func TestGood(t *testing.T) {}\n\n" +
			"func TestBad(t *testing.T) { t.Fatal(\"wrong answer 3\") }\n\n" +
			"func TestLater(t *testing.T) { t.Skip(\"not today\") }\n\n" +
			"func TestTable(t *testing.T) {\n\tt.Run(\"one\", func(t *testing.T) {})\n}\n"
		o := run(t, sb.Agent, Program{Language: lng("go"), Code: []byte(src), Name: "sol_test.go", Timeout: 2 * time.Minute})
		want := []kiln.TestCase{
			{Name: "TestGood", Status: "passed"},
			{Name: "TestBad", Status: "failed"},
			{Name: "TestLater", Status: "skipped"},
			{Name: "TestTable", Status: "passed"},
			{Name: "TestTable/one", Status: "passed"},
		}
		if !o.res.Tests || !cmp.Equal(o.res.TestCases, want, ignoreMsg) {
			t.Errorf("go test cases: %v\n%s\nwant %v", o.res.TestCases, o, want)
		}
		for _, c := range o.res.TestCases {
			if c.Name == "TestBad" && !strings.Contains(c.Message, "wrong answer 3") {
				t.Errorf("TestBad's message %q; want what it logged", c.Message)
			}
		}
		if r := Report(o.res.TestCases); r.Passed != 3 || r.Failed != 1 || r.Skipped != 1 {
			t.Errorf("report %+v; want 3 passed, 1 failed, 1 skipped", r)
		}
	})
	t.Run("rust", func(t *testing.T) {
		needLanguage(t, "rust")
		src := "fn add(a: i32, b: i32) -> i32 { a - b }\n\nfn main() {}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n" +
			"    #[test]\n    fn adds() { assert_eq!(add(2, 2), 4); }\n\n" +
			"    #[test]\n    fn zero() { assert_eq!(add(0, 0), 0); }\n\n" +
			"    #[test]\n    #[ignore]\n    fn slow() {}\n}\n"
		o := run(t, sb.Agent, Program{Language: lng("rust"), Code: []byte(src), Name: "sol.rs", Timeout: 2 * time.Minute})
		want := []kiln.TestCase{
			{Name: "tests::adds", Status: "failed"},
			{Name: "tests::slow", Status: "skipped"},
			{Name: "tests::zero", Status: "passed"},
		}
		sorted := cmpopts.SortSlices(func(a, b kiln.TestCase) bool { return a.Name < b.Name })
		if !o.res.Tests || !cmp.Equal(o.res.TestCases, want, ignoreMsg, sorted) {
			t.Errorf("rust test cases: %v\n%s\nwant %v", o.res.TestCases, o, want)
		}
		for _, c := range o.res.TestCases {
			if c.Name == "tests::adds" && (!strings.Contains(c.Message, "sol.rs:10") || !strings.Contains(c.Message, "left")) {
				t.Errorf("tests::adds's message %q; want the assertion's values", c.Message)
			}
		}
	})
	t.Run("rust asked", func(t *testing.T) {
		needLanguage(t, "rust")
		// main has a body, so only Test makes it run the tests.
		src := "fn main() { println!(\"main\"); }\n\n#[test]\nfn one() { assert!(true); }\n"
		o := run(t, sb.Agent, Program{Language: lng("rust"), Code: []byte(src), Name: "sol.rs", Test: true, Timeout: 2 * time.Minute})
		if !o.res.Tests || len(o.res.TestCases) != 1 || o.res.TestCases[0].Status != "passed" || strings.Contains(o.stdout, "main\n") {
			t.Errorf("Test on a Rust file whose main has a body: %v, cases %v; want its test run, not main", o, o.res.TestCases)
		}
	})
}
