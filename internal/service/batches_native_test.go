package service

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/batch"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/programs"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// genItem is a generated program with the verdict it must get.
type genItem struct {
	batch.Item
	passed bool
	reason batch.Reason
}

// generatedBatch writes a few hundred programs the way a model might:
// mostly Python and JavaScript (cheap to start), a few compiled ones
// (a build per item is slow on a small machine), with right and wrong
// answers, crashes, compile errors, timeouts and a memory hog.
func generatedBatch() []genItem {
	var out []genItem
	add := func(it batch.Item, passed bool, reason batch.Reason) {
		it.ID = fmt.Sprintf("%s-%d", it.Language, len(out))
		out = append(out, genItem{Item: it, passed: passed, reason: reason})
	}
	stdout := func(s string) batch.Check { return batch.Check{Stdout: &s} }
	short := kiln.Limits{Timeout: 2 * time.Second}
	for i := range 150 {
		a, b := i, 2*i+1
		want := fmt.Sprintf("%d\n", a+b)
		switch i % 6 {
		case 0, 1:
			add(batch.Item{Language: "python", Code: fmt.Sprintf("a, b = %d, %d\nprint(a + b)", a, b), Check: stdout(want)}, true, "")
		case 2:
			add(batch.Item{Language: "python", Code: fmt.Sprintf("print(%d + %d + 1)", a, b), Check: stdout(want)}, false, batch.WrongAnswer)
		case 3:
			add(batch.Item{Language: "python", Code: "def add(a, b):\n    return a + b\n",
				Check: batch.Check{Test: fmt.Sprintf("assert add(%d, %d) == %d", a, b, a+b)}}, true, "")
		case 4:
			add(batch.Item{Language: "python", Code: "def add(a, b):\n    return a * b\n",
				Check: batch.Check{Test: fmt.Sprintf("assert add(%d, %d) == %d", a+2, b+2, a+b+4)}}, false, batch.WrongAnswer)
		case 5:
			if i%12 == 5 {
				add(batch.Item{Language: "python", Code: fmt.Sprintf("xs = [%d]\nprint(xs[3])", a), Check: stdout(want)}, false, batch.RuntimeError)
			} else {
				add(batch.Item{Language: "python", Code: fmt.Sprintf("# %d\ndef f(:\n  pass", i), Check: stdout(want)}, false, batch.CompileError)
			}
		}
	}
	for i := range 110 {
		a, b := i, 3*i
		want := fmt.Sprintf("%d\n", a*b)
		switch i % 5 {
		case 0, 1:
			add(batch.Item{Language: "javascript", Code: fmt.Sprintf("const [a, b] = [%d, %d];\nconsole.log(a * b);", a, b), Check: stdout(want)}, true, "")
		case 2:
			add(batch.Item{Language: "javascript", Code: fmt.Sprintf("console.log(%d * %d + 1)", a, b), Check: stdout(want)}, false, batch.WrongAnswer)
		case 3:
			add(batch.Item{Language: "javascript", Code: "function mul(a, b) { return a * b }",
				Check: batch.Check{Test: fmt.Sprintf("const assert = require('assert');\nassert.strictEqual(mul(%d, %d), %d);", a, b, a*b)}}, true, "")
		case 4:
			add(batch.Item{Language: "javascript", Code: "function mul(a, b) { return undefinedThing(a, b) }",
				Check: batch.Check{Test: fmt.Sprintf("const assert = require('assert');\nassert.strictEqual(mul(%d, %d), %d);", a, b, a*b)}}, false, batch.RuntimeError)
		}
	}
	// Timeouts and a memory hog.
	for i := range 3 {
		add(batch.Item{Language: "python", Code: fmt.Sprintf("i = %d\nwhile True:\n    i += 1", i), Limits: short, Check: stdout("")}, false, batch.Timeout)
	}
	add(batch.Item{Language: "javascript", Code: "for (;;) {}", Limits: short, Check: stdout("")}, false, batch.Timeout)
	add(batch.Item{Language: "python", Code: "x = bytearray(512 << 20)\nprint(len(x))", Limits: kiln.Limits{MemoryBytes: 128 * kiln.MiB}, Check: stdout("")}, false, batch.Memory)

	// Compiled languages, few of each.
	for i := range 3 {
		want := fmt.Sprintf("%d\n", i*i)
		add(batch.Item{Language: "cpp", Code: fmt.Sprintf("#include <iostream>\nint main() { int n = %d; std::cout << n * n << \"\\n\"; }\n", i), Check: stdout(want)}, true, "")
	}
	add(batch.Item{Language: "cpp", Code: "#include <iostream>\nint main() { std::cout << 5 << \"\\n\"; }\n", Check: stdout("4\n")}, false, batch.WrongAnswer)
	add(batch.Item{Language: "cpp", Code: "#include <cstdlib>\nint main() { std::abort(); }\n", Check: stdout("")}, false, batch.RuntimeError)
	add(batch.Item{Language: "cpp", Code: "int main() { return x }\n", Check: stdout("")}, false, batch.CompileError)
	// A build option: OpenSSL's MD5 links only with -lcrypto.
	md5 := "#include <openssl/md5.h>\n#include <cstdio>\nint main() { unsigned char d[16]; MD5((const unsigned char*)\"abc\", 3, d); for (int i = 0; i < 16; i++) std::printf(\"%02x\", d[i]); std::printf(\"\\n\"); }\n"
	add(batch.Item{Language: "cpp", Code: md5, BuildOptions: []string{"-lcrypto"}, Check: stdout("900150983cd24fb0d6963f7d28e17f72\n")}, true, "")
	add(batch.Item{Language: "java", Code: "class Main { public static void main(String[] a) { System.out.println(7 * 6); } }\n", Check: stdout("42\n")}, true, "")
	add(batch.Item{Language: "java", Code: "class Main { public static void main(String[] a) { System.exit(3); } }\n", Check: batch.Check{ExitCode: ptrInt(3)}}, true, "")
	add(batch.Item{Language: "java", Code: "class Main { public static void main(String[] a) { int[] x = new int[1]; x[2] = 1; } }\n", Check: stdout("")}, false, batch.RuntimeError)
	add(batch.Item{Language: "go", Code: "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(6 * 7) }\n", Check: stdout("42\n")}, true, "")
	add(batch.Item{Language: "go", Code: "package main\n\nfunc main() { panic(\"boom\") }\n", Check: stdout("")}, false, batch.RuntimeError)
	add(batch.Item{Language: "go", Code: "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(41) }\n", Check: stdout("42\n")}, false, batch.WrongAnswer)
	add(batch.Item{Language: "rust", Code: "fn main() { println!(\"{}\", 6 * 7); }\n", Check: stdout("42\n")}, true, "")
	add(batch.Item{Language: "rust", Code: "fn main() { let v: Vec<i32> = vec![]; println!(\"{}\", v[1]); }\n", Check: stdout("")}, false, batch.RuntimeError)
	add(batch.Item{Language: "rust", Code: "fn main() { let x: i32 = \"no\"; }\n", Check: stdout("")}, false, batch.CompileError)
	// Test programs of compiled languages (batch.ProgramOf).
	add(batch.Item{Language: "go", Code: "func Add(a, b int) int { return a + b }\n",
		Check: batch.Check{Test: "import \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n"}}, true, "")
	add(batch.Item{Language: "rust", Code: "fn add(a: i32, b: i32) -> i32 { a - b }\n\nfn main() {}\n",
		Check: batch.Check{Test: "#[test]\nfn adds() { assert_eq!(add(2, 3), 5); }\n"}}, false, batch.WrongAnswer)
	add(batch.Item{Language: "cpp", Code: "int add(int a, int b) { return a + b; }\n",
		Check: batch.Check{Test: "#include <cassert>\nint main() { assert(add(2, 3) == 5); }\n"}}, true, "")
	return out
}

func ptrInt(n int) *int { return &n }

// TestGeneratedBatchIsJudgedCorrectly runs a few hundred generated
// programs in six languages through real sandboxes and checks every
// verdict, then reruns it with the cache (every item marked cached, the
// same verdicts).
func TestGeneratedBatchIsJudgedCorrectly(t *testing.T) {
	ts := newNativeService(t, Config{Workspaces: "tmpfs"})
	for _, name := range []string{"python", "javascript", "cpp", "java", "go", "rust"} {
		l, err := lang.Lookup(name)
		if err != nil || l.Available() != nil {
			t.Skipf("needs the %s runtime (scripts/deps installs it)", name)
		}
	}
	u := ts.user(t, "judge", true)
	gen := generatedBatch()
	items := make([]batch.Item, len(gen))
	for i, g := range gen {
		items[i] = g.Item
	}
	for round, cached := range []bool{false, true} {
		start := time.Now()
		_, w, err := ts.CreateBatch(ctxT(t, 5*time.Minute), u, BatchRequest{Items: items, Cache: true})
		if err != nil {
			t.Fatal(err)
		}
		got := collectBatch(t, w)
		t.Logf("round %d: %d items in %v", round, len(got), time.Since(start).Round(time.Millisecond))
		for i, g := range gen {
			r, ok := got[i]
			switch {
			case !ok:
				t.Errorf("%s: no result", g.ID)
			case r.Passed != g.passed || r.Reason != g.reason:
				t.Errorf("%s: passed=%v reason=%q (%s), want passed=%v reason=%q\ncode: %q\nstdout %q stderr %q",
					g.ID, r.Passed, r.Reason, r.Detail, g.passed, g.reason, g.Code, r.Result.Stdout, r.Result.Stderr)
			case r.Cached != cached:
				t.Errorf("%s: cached=%v in round %d", g.ID, r.Cached, round)
			}
		}
	}
}

// TestBatchResumesAfterRestartNative stops a native service in the middle
// of a batch (its sandboxes die with it) and starts another on the same
// store and data directory: the batch finishes there, every item judged.
func TestBatchResumesAfterRestartNative(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the native backend's sandboxes")
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	open := func() (*Service, *store.DB) {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		st, err := sqlite.Open(context.Background(), filepath.Join(dir, "kiln.db"))
		if err != nil {
			t.Fatal(err)
		}
		nb, err := native.New(native.Config{}, log)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(context.Background(), Config{DataDir: dir, Workspaces: workspace.Tmpfs, PoolSize: -1, UserConcurrency: 2},
			st, engine.New(nb, log), log)
		if err != nil {
			t.Fatal(err)
		}
		return svc, st
	}
	svc, st := open()
	u := kiln.User{Name: "judge"}
	if err := st.CreateUser(context.Background(), &u); err != nil {
		t.Fatal(err)
	}
	var items []batch.Item
	for i := range 8 {
		code := fmt.Sprintf("import time\ntime.sleep(%d)\nprint(%d)", min(i, 2), i)
		want := fmt.Sprintf("%d\n", i)
		items = append(items, batch.Item{Language: "python", Code: code, Check: batch.Check{Stdout: &want}})
	}
	sum, w, err := svc.CreateBatch(context.Background(), u, BatchRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-w.Results:
		case <-time.After(2 * time.Minute):
			t.Fatal("the first items did not finish")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc.Close(ctx)
	b, err := st.Batch(ctx, u.ID, sum.ID)
	if err != nil {
		t.Fatal(err)
	}
	// At most the two running items could finish while it stopped.
	if b.Status != store.BatchRunning || b.Done >= len(items) {
		t.Fatalf("after the stop: %+v; want it running with items left", b)
	}
	t.Logf("stopped with %d of %d items done", b.Done, b.Total)
	st.Close()

	svc, st = open()
	defer func() { svc.Close(context.Background()); st.Close() }()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, err := svc.Batch(context.Background(), u, sum.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status == store.BatchDone {
			if b.Done != len(items) || b.Passed != len(items) {
				t.Errorf("after the restart: %d done, %d passed, reasons %v; want all %d passed", b.Done, b.Passed, b.Reasons, len(items))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch did not finish after the restart: %+v", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBatchCompiledTestPrograms: an item's test program in a compiled
// language runs after its solution in the item's sandbox, joined as
// HumanEval-X joins them (batch.ProgramOf): C and C++ asserts in the
// test's main, Rust #[test]s, Go Test functions in a _test.go beside the
// solution, Java's main throwing AssertionError and JUnit @Test methods.
// A right solution passes; a wrong one is a wrong answer naming the
// failed check; a crash is a runtime error; a solution with its own main
// beside a C test's is a compile error.
func TestBatchCompiledTestPrograms(t *testing.T) {
	ts := newNativeService(t, Config{Workspaces: "tmpfs"})
	for _, name := range []string{"c", "cpp", "rust", "go", "java"} {
		l, err := lang.Lookup(name)
		if err != nil || l.Available() != nil {
			t.Skipf("needs the %s runtime (scripts/deps installs it)", name)
		}
	}
	u := ts.user(t, "judge", true)
	type want struct {
		passed bool
		reason batch.Reason
		detail string // in the verdict's detail
	}
	cases := []struct {
		item batch.Item
		want want
	}{}
	add := func(language, code, test string, w want) {
		cases = append(cases, struct {
			item batch.Item
			want want
		}{batch.Item{ID: fmt.Sprintf("%s-%d", language, len(cases)), Language: language, Code: code, Check: batch.Check{Test: test}}, w})
	}
	cTest := "#include <assert.h>\nint main(void) { assert(twice(2) == 4); assert(twice(5) == 10); return 0; }\n"
	add("c", "int twice(int x) { return 2 * x; }\n", cTest, want{true, "", ""})
	add("c", "int twice(int x) { return x + 2; }\n", cTest, want{false, batch.WrongAnswer, "twice(5) == 10"})
	add("c", "int twice(int x) { return 2 * x; }\nint main(void) { return 0; }\n", cTest, want{false, batch.CompileError, "main"})
	cppTest := "#include <cassert>\n#include <vector>\nint main() { std::vector<int> v{1, 2}; assert(twice(v[1]) == 4); }\n"
	add("cpp", "int twice(int x) { return 2 * x; }\n", cppTest, want{true, "", ""})
	add("cpp", "int twice(int x) { return x * x * x; }\n", cppTest, want{false, batch.WrongAnswer, "twice(v[1]) == 4"})
	add("cpp", "int twice(int x) { int *p = nullptr; return *p + x; }\n", cppTest, want{false, batch.RuntimeError, ""})
	rsTest := "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn doubles() { assert_eq!(twice(21), 42); }\n}\n"
	add("rust", "fn twice(x: i32) -> i32 { 2 * x }\n\nfn main() {}\n", rsTest, want{true, "", ""})
	add("rust", "fn twice(x: i32) -> i32 { x + 2 }\n\nfn main() { println!(\"main has a body\"); }\n", rsTest, want{false, batch.WrongAnswer, "tests::doubles"})
	goTest := "import \"testing\"\n\nfunc TestTwice(t *testing.T) {\n\tif got := Twice(21); got != 42 {\n\t\tt.Fatalf(\"Twice(21) = %d, want 42\", got)\n\t}\n}\n"
	add("go", "func Twice(x int) int { return 2 * x }\n", goTest, want{true, "", ""})
	add("go", "package main\n\nfunc Twice(x int) int { return x }\n\nfunc main() {}\n", goTest, want{false, batch.WrongAnswer, "Twice(21) = 21, want 42"})
	javaTest := "public class Main {\n    public static void main(String[] args) {\n        if (new Solution().twice(21) != 42) throw new AssertionError(\"twice(21)\");\n    }\n}\n"
	add("java", "import java.util.*;\n\npublic class Solution {\n    public int twice(int x) { return 2 * x; }\n}\n", javaTest, want{true, "", ""})
	add("java", "class Solution {\n    int twice(int x) { return x; }\n}\n", javaTest, want{false, batch.WrongAnswer, "AssertionError"})
	if programs.JUnitInstalled() == nil {
		junit := "import org.junit.Test;\nimport static org.junit.Assert.assertEquals;\n\npublic class SolutionTest {\n    @Test public void doubles() { assertEquals(42, new Solution().twice(21)); }\n}\n"
		add("java", "class Solution {\n    int twice(int x) { return 2 * x; }\n}\n", junit, want{true, "", ""})
		add("java", "class Solution {\n    int twice(int x) { return x + 1; }\n}\n", junit, want{false, batch.WrongAnswer, "SolutionTest.doubles"})
	}
	items := make([]batch.Item, len(cases))
	for i, c := range cases {
		items[i] = c.item
	}
	_, w, err := ts.CreateBatch(ctxT(t, 10*time.Minute), u, BatchRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	got := collectBatch(t, w)
	for i, c := range cases {
		r, ok := got[i]
		switch {
		case !ok:
			t.Errorf("%s: no result", c.item.ID)
		case r.Passed != c.want.passed || r.Reason != c.want.reason || !strings.Contains(r.Detail, c.want.detail):
			t.Errorf("%s: passed=%v reason=%q detail %q; want passed=%v reason=%q detail with %q\nstdout %q\nstderr %q\nerror %+v",
				c.item.ID, r.Passed, r.Reason, r.Detail, c.want.passed, c.want.reason, c.want.detail, r.Result.Stdout, r.Result.Stderr, r.Result.Error)
		}
	}
}
