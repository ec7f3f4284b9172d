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

// needJUnit skips when Debian's JUnit is missing, saying what to install.
func needJUnit(t *testing.T) {
	t.Helper()
	needLanguage(t, "java")
	if err := JUnitInstalled(); err != nil {
		t.Skip(kiln.Message(err))
	}
}

// TestJavaJUnit: a Java test class runs with JUnit's console launcher in
// the sandbox, chosen by its name (*Test.java), by having no main, or by
// Test; JUnit 4 and JUnit 5 methods report each outcome, a failure with
// its assertion's message; a class with a main and another name runs
// main, with a note.
func TestJavaJUnit(t *testing.T) {
	needJUnit(t)
	sb := newSandbox(t, newBackend(t), native.Spec{})
	ignoreMsg := cmpopts.IgnoreFields(kiln.TestCase{}, "Message")
	sorted := cmpopts.SortSlices(func(a, b kiln.TestCase) bool { return a.Name < b.Name })
	message := func(cases []kiln.TestCase, name string) string {
		for _, c := range cases {
			if c.Name == name {
				return c.Message
			}
		}
		return ""
	}

	t.Run("junit4 by name", func(t *testing.T) {
		src := "import org.junit.Test;\nimport org.junit.Ignore;\nimport static org.junit.Assert.*;\n\n" +
			"public class CalcTest {\n" +
			"    static int add(int a, int b) { return a + b; }\n" +
			"    @Test public void adds() { assertEquals(4, add(2, 2)); }\n" +
			"    @Test public void wrong() { assertEquals(\"sum of 2 and 3\", 6, add(2, 3)); }\n" +
			"    @Ignore @Test public void later() {}\n" +
			"    public static void main(String[] a) { System.out.println(\"main ran\"); }\n" +
			"}\n"
		o := run(t, sb.Agent, Program{Language: lng("java"), Files: []File{{Path: "CalcTest.java", Data: []byte(src)}}, Timeout: 2 * time.Minute})
		want := []kiln.TestCase{
			{Name: "CalcTest.adds", Status: "passed"},
			{Name: "CalcTest.later", Status: "skipped"},
			{Name: "CalcTest.wrong", Status: "failed"},
		}
		if !o.res.Tests || !cmp.Equal(o.res.TestCases, want, ignoreMsg, sorted) {
			t.Fatalf("JUnit 4 cases: %v\n%s\nwant %v", o.res.TestCases, o, want)
		}
		if m := message(o.res.TestCases, "CalcTest.wrong"); !strings.Contains(m, "sum of 2 and 3") || !strings.Contains(m, "expected:<6> but was:<5>") {
			t.Errorf("CalcTest.wrong's message %q; want the assertion's message and values", m)
		}
		if o.res.Exit.Code == 0 || strings.Contains(o.stdout, "main ran") {
			t.Errorf("a failing JUnit run: %v; want a non-zero exit and main not run", o)
		}
	})

	t.Run("junit5 cell without main", func(t *testing.T) {
		src := "import org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.*;\n\n" +
			"class Checks {\n" +
			"    @Test void ok() { assertTrue(\"abc\".startsWith(\"a\")); }\n" +
			"    @Test void bad() { assertEquals(1, 2, \"one is two\"); }\n" +
			"}\n"
		o := run(t, sb.Agent, Program{Language: lng("java"), Code: []byte(src), Name: "Checks.java", Timeout: 2 * time.Minute})
		want := []kiln.TestCase{{Name: "Checks.bad()", Status: "failed"}, {Name: "Checks.ok()", Status: "passed"}}
		if !o.res.Tests || !cmp.Equal(o.res.TestCases, want, ignoreMsg, sorted) {
			t.Fatalf("JUnit 5 cases: %v\n%s\nwant %v", o.res.TestCases, o, want)
		}
		if m := message(o.res.TestCases, "Checks.bad()"); !strings.Contains(m, "one is two") {
			t.Errorf("Checks.bad()'s message %q; want the assertion's message", m)
		}
	})

	t.Run("none found", func(t *testing.T) {
		src := "public class Main {\n    public static void main(String[] a) {}\n}\n"
		o := run(t, sb.Agent, Program{Language: lng("java"), Code: []byte(src), Test: true, Timeout: 2 * time.Minute})
		if !o.res.Tests || o.res.Exit.Code == 0 || len(o.res.TestCases) != 0 {
			t.Errorf("tests asked of a class without any: %v, cases %v; want a failed run, not a pass", o, o.res.TestCases)
		}
	})

	t.Run("all pass", func(t *testing.T) {
		src := "import org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.*;\n\n" +
			"public class Main {\n    @Test void one() { assertEquals(2, 1 + 1); }\n" +
			"    public static void main(String[] a) { System.out.println(\"main ran\"); }\n}\n"
		// Main.java has a main: only Test makes it run its tests.
		o := run(t, sb.Agent, Program{Language: lng("java"), Code: []byte(src), Test: true, Timeout: 2 * time.Minute})
		if !o.res.Tests || o.res.Exit.Code != 0 || len(o.res.TestCases) != 1 || o.res.TestCases[0].Status != "passed" {
			t.Errorf("Test on a class with main: %v, cases %v; want its one test passed, exit 0", o, o.res.TestCases)
		}
		o = run(t, sb.Agent, Program{Language: lng("java"), Code: []byte(src), Timeout: 2 * time.Minute})
		if o.res.Tests || o.stdout != "main ran\n" {
			t.Errorf("without Test: %v; want main run", o)
		}
		noted := false
		for _, d := range o.res.Diagnostics {
			noted = noted || d.Severity == "warning" && strings.Contains(d.Message, "@Test methods were not run")
		}
		if !noted {
			t.Errorf("diagnostics %+v; want a warning that the @Test methods were not run", o.res.Diagnostics)
		}
	})
}
