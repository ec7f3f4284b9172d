package programs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/langdef"
	"github.com/kiln-dev/kiln/internal/protocol"
)

func TestMain(m *testing.M) {
	// Sandboxes start this test binary as their PID 1 and as the spawn stage.
	agent.Dispatch()
	os.Exit(m.Run())
}

// The sandbox's agent is what Run gets in production.
var (
	_ Execer      = (*agentclient.Client)(nil)
	_ StdinExecer = (*agentclient.Client)(nil)
)

func newBackend(t testing.TB) *native.Backend {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
	b, err := native.New(native.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("native.New: %v", err)
	}
	return b
}

func newSandbox(t testing.TB, b *native.Backend, spec native.Spec) *native.Sandbox {
	t.Helper()
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

func newHost(t testing.TB) *hostExecer {
	return &hostExecer{root: t.TempDir(), tmp: t.TempDir()}
}

// needLanguage skips when the runtime is not installed, saying what to
// install (CI has them all).
func needLanguage(t testing.TB, name string) {
	t.Helper()
	if err := lng(name).Available(); err != nil {
		t.Skip(kiln.Message(err))
	}
}

// outcome is what one Run gave.
type outcome struct {
	res            Result
	stdout, stderr string
	took           time.Duration
}

func run(t testing.TB, ex Execer, p Program) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	res, err := Run(context.Background(), ex, p, &stdout, &stderr)
	if err != nil {
		t.Fatalf("Run(%s %s): %v", p.Language.Name, p.Entry, err)
	}
	return outcome{res: res, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
}

func (o outcome) String() string {
	return fmt.Sprintf("phase %s, exit %+v\nstdout: %q\nstderr: %q\ncompile log:\n%s", o.res.Phase, o.res.Exit, o.stdout, o.stderr, o.res.CompileLog)
}

// entryOf is the default entry of a language.
func entryOf(language string) string {
	if language == "java" {
		return "Main.java"
	}
	return "main" + lng(language).Ext
}

// lcase is one case of the compatibility suite.
type lcase struct {
	name  string
	prog  Program
	host  bool // also run on the host, and require the same stdout and exit
	check func(t *testing.T, o outcome, ex Execer)
}

func (s suite) cases() []lcase {
	entry := entryOf(s.lang)
	// The first Go build of a sandbox compiles the standard library: 8
	// CPU-seconds, and more than the default 30 s of wall time on a busy
	// host. The cases are not about time limits, except where they say so.
	const timeout = 2 * time.Minute
	prog := func(src string) Program {
		return Program{Language: lng(s.lang), Files: []File{{Path: entry, Data: []byte(src)}}, Timeout: timeout}
	}
	ranOK := func(want string) func(t *testing.T, o outcome, ex Execer) {
		return func(t *testing.T, o outcome, ex Execer) {
			t.Helper()
			if o.res.Phase != PhaseRun || o.res.Exit.Code != 0 || o.stdout != want {
				t.Errorf("got %v\nwant stdout %q and exit 0", o, want)
			}
		}
	}
	withArgs := prog(s.args)
	withArgs.Args = []string{"one", "two words", "-x", "ünï"}
	withStdin := prog(s.echo)
	withStdin.Stdin = []byte("line one\nline two ✓\n")
	looping := prog(s.loop)
	looping.Args = []string{"stop"}
	reading := prog(s.read)
	reading.Files = append(reading.Files, File{Path: "data.txt", Data: []byte("uploaded data\nsecond line\n")})
	return []lcase{
		{name: "hello", prog: prog(s.hello), host: true, check: ranOK("hello, world\n")},
		{name: "unicode", prog: prog(s.unicode), host: true, check: ranOK(unicodeLine + "\n")},
		{name: "stdin", prog: withStdin, host: true, check: ranOK("line one\nline two ✓\n")},
		{name: "args", prog: withArgs, host: true, check: ranOK("one\ntwo words\n-x\nünï\n")},
		{name: "exit3", prog: prog(s.exit3), host: true, check: func(t *testing.T, o outcome, ex Execer) {
			if o.res.Phase != PhaseRun || o.res.Exit.Code != 3 {
				t.Errorf("got %v\nwant exit 3", o)
			}
		}},
		{name: "compile error", prog: prog(s.syntax), host: true, check: func(t *testing.T, o outcome, ex Execer) {
			if o.res.Phase != PhaseCompile {
				t.Fatalf("got %v\nwant phase compile", o)
			}
			for _, d := range o.res.Diagnostics {
				if d.Severity == "error" && d.File == entry && d.Line == s.syntaxLine {
					return
				}
			}
			t.Errorf("diagnostics %+v have no error at %s:%d; compile log:\n%s", o.res.Diagnostics, entry, s.syntaxLine, o.res.CompileLog)
		}},
		{name: "runtime error", prog: prog(s.crash), host: true, check: func(t *testing.T, o outcome, ex Execer) {
			if o.res.Phase != PhaseRun || (o.res.Exit.Code == 0 && o.res.Exit.Signal == "") {
				t.Fatalf("got %v\nwant a failed run", o)
			}
			if s.crashWant != "" && !regexp.MustCompile(s.crashWant).MatchString(o.stderr) {
				t.Errorf("stderr %q does not match %q", o.stderr, s.crashWant)
			}
		}},
		{name: "read file", prog: reading, host: true, check: ranOK("uploaded data\nsecond line\n")},
		{name: "write file", prog: prog(s.write), host: true, check: func(t *testing.T, o outcome, ex Execer) {
			ranOK("")(t, o, ex)
			got, err := ex.ReadFile(context.Background(), "out.txt", 1<<10)
			if err != nil || string(got) != "artifact\n" {
				t.Errorf("ReadFile(out.txt) = %q, %v; want \"artifact\\n\"", got, err)
			}
		}},
		{name: "multi file", prog: Program{Language: lng(s.lang), Files: s.multi, Timeout: timeout}, host: true, check: ranOK(s.multiWant)},
		{name: "timeout", prog: looping, check: func(t *testing.T, o outcome, ex Execer) {
			// The first run, with an argument, stops and builds; the
			// second loops, so only the run meets the short timeout.
			ranOK("stopped\n")(t, o, ex)
			p := Program{Language: lng(s.lang), Timeout: time.Second}
			o = run(t, ex, p)
			if !o.res.Cached || o.res.Phase != PhaseRun || !o.res.Exit.TimedOut {
				t.Errorf("got %v, cached %v\nwant a cached build and a run that timed out", o, o.res.Cached)
			}
		}},
		{name: "flood", prog: func() Program { p := prog(s.flood); p.OutputBytes = 64 << 10; return p }(), check: func(t *testing.T, o outcome, ex Execer) {
			if o.res.Phase != PhaseRun || !o.res.Exit.OutputTruncated || o.res.Exit.OutputBytes > 64<<10 || len(o.stdout) > 64<<10 {
				t.Errorf("phase %s, exit %+v, %d bytes of stdout; want truncated at 64 KiB", o.res.Phase, o.res.Exit, len(o.stdout))
			}
		}},
	}
}

// TestLanguages is the compatibility suite: the same cases for every
// program language, each run in a sandbox and, where no limit is involved,
// directly on the host, with the same stdout and exit status.
func TestLanguages(t *testing.T) {
	b := newBackend(t)
	for _, s := range suites {
		t.Run(s.lang, func(t *testing.T) {
			t.Parallel()
			needLanguage(t, s.lang)
			// One sandbox (and one host workspace) per language, as in a
			// session: the cases share the build cache.
			sb := newSandbox(t, b, native.Spec{})
			host := newHost(t)
			for _, c := range s.cases() {
				t.Run(c.name, func(t *testing.T) {
					o := run(t, sb.Agent, c.prog)
					if c.name == "hello" {
						t.Logf("%s hello world, compiled and run in the sandbox: %v (run %v)", s.lang, o.took.Round(time.Millisecond), time.Duration(o.res.Exit.WallNs).Round(time.Millisecond))
						again := run(t, sb.Agent, Program{Language: lng(s.lang)})
						t.Logf("%s hello world again, cached %v: %v", s.lang, again.res.Cached, again.took.Round(time.Millisecond))
						if !again.res.Cached || again.stdout != o.stdout {
							t.Errorf("second run: %v, cached %v; want the cached build's output", again, again.res.Cached)
						}
					}
					c.check(t, o, sb.Agent)
					if !c.host {
						return
					}
					h := run(t, host, c.prog)
					c.check(t, h, host)
					if h.stdout != o.stdout || h.res.Exit.Code != o.res.Exit.Code || h.res.Exit.Signal != o.res.Exit.Signal || h.res.Phase != o.res.Phase {
						t.Errorf("host and sandbox differ:\nhost: %v\nsandbox: %v", h, o)
					}
					if c.name == "hello" {
						// Builds, caches and the compilers' files stay out
						// of the workspace.
						checkTidy(t, sb.Agent, s.lang)
						checkTidy(t, host, s.lang)
					}
				})
			}
		})
	}
}

func TestCache(t *testing.T) {
	needLanguage(t, "c")
	sb := newSandbox(t, newBackend(t), native.Spec{})
	src := func(msg string) Program {
		return Program{Language: lng("c"), Files: []File{{Path: "main.c", Data: []byte("#include <stdio.h>\nint main(void) { puts(\"" + msg + "\"); return 0; }\n")}}}
	}
	ex := &countingExecer{Execer: sb.Agent}
	first := run(t, ex, src("first"))
	if first.res.Cached || first.stdout != "first\n" {
		t.Errorf("first run: cached %v, stdout %q; want a build and a run printing first", first.res.Cached, first.stdout)
	}
	// The cached run is timed at its best of three: the host is shared.
	second := outcome{took: time.Hour}
	for range 3 {
		ex.execs = 0
		o := run(t, ex, src("first"))
		// One exec looks for the build's marker, one runs it.
		if !o.res.Cached || ex.execs != 2 || o.stdout != "first\n" {
			t.Errorf("second run: cached %v, %d execs, stdout %q; want only the marker's check and the run of the cached build", o.res.Cached, ex.execs, o.stdout)
		}
		if o.took < second.took {
			second = o
		}
	}
	t.Logf("compiled and run: %v; cached: %v", first.took, second.took)
	if second.took > first.took/2 {
		t.Errorf("the cached run took %v, the first %v; want it much faster", second.took, first.took)
	}
	changed := run(t, sb.Agent, src("changed"))
	if changed.res.Cached || changed.stdout != "changed\n" {
		t.Errorf("after a change: cached %v, stdout %q; want a new build printing changed", changed.res.Cached, changed.stdout)
	}
	// A header is an input too, though it is not compiled by itself.
	hdr := func(v string) Program {
		return Program{Language: lng("c"), Files: []File{
			{Path: "main.c", Data: []byte("#include <stdio.h>\n#include \"inc/v.h\"\nint main(void) { puts(V); return 0; }\n")},
			{Path: "inc/v.h", Data: []byte("#define V \"" + v + "\"\n")},
		}}
	}
	run(t, sb.Agent, hdr("one"))
	if o := run(t, sb.Agent, hdr("two")); o.res.Cached || o.stdout != "two\n" {
		t.Errorf("after a header changed: cached %v, stdout %q; want a new build printing two", o.res.Cached, o.stdout)
	}
	// Sources already in the workspace: no files, same build.
	if o := run(t, sb.Agent, Program{Language: lng("c")}); !o.res.Cached || o.stdout != "two\n" {
		t.Errorf("without files: cached %v, stdout %q; want the cached build printing two", o.res.Cached, o.stdout)
	}
	// Old builds are evicted.
	for i := range keepBuilds + 3 {
		run(t, sb.Agent, src(fmt.Sprint("build ", i)))
	}
	if list := areaList(t, sb.Agent, path.Join(BuildArea, "build")); len(list) > keepBuilds {
		t.Errorf("%d builds kept (%v), want at most %d", len(list), list, keepBuilds)
	}
}

// TestCompilerBombs: a compiler is stopped by the sandbox's limits like any
// program, and the result says which limit.
func TestCompilerBombs(t *testing.T) {
	needLanguage(t, "cpp")
	b := newBackend(t)
	t.Run("time", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t, b, native.Spec{})
		// Twenty constants, each under gcc's limit of constexpr steps:
		// half a second each.
		src := "constexpr long f(long k) {\n  long s = 0;\n  for (long i = 0; i < 1000; i++)\n    for (long j = 0; j < 1000; j++) s += i ^ j ^ k;\n  return s;\n}\n"
		for i := range 20 {
			src += fmt.Sprintf("constexpr long v%d = f(%d);\n", i, i)
		}
		src += "int main() { return v0 == v19; }\n"
		o := run(t, sb.Agent, Program{Language: lng("cpp"), Files: []File{{Path: "main.cpp", Data: []byte(src)}}, Timeout: 3 * time.Second})
		t.Logf("%v, %d MiB peak: %+v", o.took.Round(time.Millisecond), o.res.Exit.PeakMemory>>20, o.res.Diagnostics)
		if o.res.Phase != PhaseCompile || !o.res.Exit.TimedOut || len(o.res.Diagnostics) == 0 || !strings.Contains(o.res.Diagnostics[0].Message, "time limit") {
			t.Errorf("got %v\ndiagnostics %+v\nwant a compile stopped by the time limit", o, o.res.Diagnostics)
		}
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t, b, native.Spec{Limits: kiln.Limits{MemoryBytes: 128 * kiln.MiB}})
		// Ten million initializers from a few lines of macros.
		src := "#define ONE 1,\n#define A(x) x x x x x x x x x x\nint v[] = { A(A(A(A(A(A(A(ONE))))))) };\nint main() { return v[0] - 1; }\n"
		o := run(t, sb.Agent, Program{Language: lng("cpp"), Files: []File{{Path: "main.cpp", Data: []byte(src)}}, Timeout: 30 * time.Second, MemoryBytes: 128 * kiln.MiB})
		t.Logf("%v, %d MiB peak: %+v", o.took.Round(time.Millisecond), o.res.Exit.PeakMemory>>20, o.res.Diagnostics)
		if o.res.Phase != PhaseCompile || !o.res.Exit.OOMKilled || len(o.res.Diagnostics) == 0 || !strings.Contains(o.res.Diagnostics[0].Message, "out of memory") {
			t.Errorf("got %v\ndiagnostics %+v\nwant a compile stopped by the memory limit", o, o.res.Diagnostics)
		}
	})
}

// TestInvalid: programs that cannot run are errors, before anything runs.
func TestInvalid(t *testing.T) {
	needLanguage(t, "c")
	for _, p := range []Program{
		{Language: &langdef.Language{Name: "cobol", Kind: langdef.Program}},
		{Language: lng("python")},
		{Language: lng("c"), Entry: "../main.c"},
		{Language: lng("c"), Entry: "/etc/passwd.c"},
		{Language: lng("c"), Entry: "main.py"},
		{Language: lng("c"), Entry: "-o.c"},
		{Language: lng("c"), Entry: "missing.c"},
		{Language: lng("php")},
		{Language: lng("c"), Files: []File{{Path: "../x.c"}}},
		{Language: lng("c"), Code: []byte("int main(void) { return 0; }"), Name: "../x.c"},
		{Language: lng("c"), Code: []byte("int main(void) { return 0; }"), Name: "x.py"},
		{Language: lng("c"), Code: []byte("int main(void) { return 0; }"), Name: strings.Repeat("x", 300) + ".c"},
		{Language: lng("c"), Code: []byte("int main(void) { return 0; }"), Entry: "main.c"},
	} {
		_, err := Run(context.Background(), newHost(t), p, io.Discard, io.Discard)
		if kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("Run(%+v) = %v, want an invalid error", p, err)
		}
	}
}

// TestStdinStream: a program's run reads StdinStream as it comes; its
// build does not. A runner that cannot stream stdin says so.
func TestStdinStream(t *testing.T) {
	needLanguage(t, "c")
	src := []byte("#include <stdio.h>\nint main(void) { char l[64]; while (fgets(l, sizeof l, stdin)) printf(\"[%s]\", l); return 0; }\n")
	p := Program{Language: lng("c"), Files: []File{{Path: "main.c", Data: src}}, Timeout: time.Minute}
	p.StdinStream = strings.NewReader("one\ntwo\n")
	if _, err := Run(context.Background(), newHost(t), p, io.Discard, io.Discard); kiln.KindOf(err) != kiln.Unsupported {
		t.Errorf("StdinStream on a runner without ExecStdin: %v, want an unsupported error", err)
	}
	sb := newSandbox(t, newBackend(t), native.Spec{})
	o := run(t, sb.Agent, p)
	if o.res.Phase != PhaseRun || o.res.Exit.Code != 0 || o.stdout != "[one\n][two\n]" {
		t.Errorf("got %v\nwant stdout %q", o, "[one\n][two\n]")
	}
}

// areaList lists a directory of the build area, which only execs reach.
func areaList(t *testing.T, ex Execer, dir string) []string {
	t.Helper()
	var out bytes.Buffer
	ok, err := areaExec(context.Background(), ex, []string{lsBin, "-1", "--", dir}, nil, &out)
	if err != nil || !ok {
		t.Fatalf("ls %s: %v, %v", dir, ok, err)
	}
	return strings.Fields(out.String())
}

// checkTidy fails unless the workspace holds only the hello world program:
// builds, caches and compilers' files are in the build area.
func checkTidy(t *testing.T, ex Execer, language string) {
	t.Helper()
	list, err := ex.List(context.Background(), ".")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Name)
	}
	sort.Strings(got)
	want := []string{entryOf(language)}
	if !cmp.Equal(got, want) {
		t.Errorf("%T: workspace holds %v, want %v (%d entries)", ex, got, want, len(list))
	}
}

// TestUncached: a build whose inputs are too many to hash is not cached, and
// is still right. On the host: no sandbox is needed to test this.
func TestUncached(t *testing.T) {
	needLanguage(t, "c")
	h := newHost(t)
	// Listing data/ uses up the budget, so more/ (which might hold a
	// header) is not looked at.
	for _, d := range []string{"data", "more"} {
		if err := os.Mkdir(filepath.Join(h.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxWalkEntries {
		if err := os.WriteFile(filepath.Join(h.root, "data", fmt.Sprintf("%04d.txt", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, msg := range []string{"one", "one", "two"} {
		o := run(t, h, Program{Language: lng("c"), Files: []File{{Path: "main.c", Data: []byte("#include <stdio.h>\nint main(void) { puts(\"" + msg + "\"); return 0; }\n")}}})
		if o.res.Cached || o.stdout != msg+"\n" {
			t.Errorf("cached %v, stdout %q; want an uncached build printing %s", o.res.Cached, o.stdout, msg)
		}
	}
}

// TestJavaPackage: the main class is named after the entry's package, and
// the other classes are found from the package's root, also for the cache.
func TestJavaPackage(t *testing.T) {
	needLanguage(t, "java")
	h := newHost(t)
	tool := "// A program in a package.\npackage app.tools;\n\nimport app.util.Twice;\n\npublic class Tool {\n    public static void main(String[] args) {\n        System.out.println(Helper.name() + \" \" + Twice.of(21));\n    }\n}\n"
	twice := func(factor string) File {
		return File{Path: "src/app/util/Twice.java", Data: []byte("package app.util;\n\npublic class Twice {\n    public static int of(int n) { return " + factor + " * n; }\n}\n")}
	}
	files := []File{
		{Path: "src/app/tools/Tool.java", Data: []byte(tool)},
		{Path: "src/app/tools/Helper.java", Data: []byte("package app.tools;\n\nclass Helper {\n    static String name() { return \"tool\"; }\n}\n")},
		twice("2"),
	}
	o := run(t, h, Program{Language: lng("java"), Files: files, Entry: "src/app/tools/Tool.java"})
	if o.res.Phase != PhaseRun || o.stdout != "tool 42\n" {
		t.Errorf("got %v\nwant tool 42", o)
	}
	o = run(t, h, Program{Language: lng("java"), Files: []File{twice("3")}, Entry: "src/app/tools/Tool.java"})
	if o.res.Cached || o.stdout != "tool 63\n" {
		t.Errorf("after a change in another package: cached %v, %v\nwant a new build printing tool 63", o.res.Cached, o)
	}
}

// countingExecer counts the processes a Run starts.
type countingExecer struct {
	Execer
	execs int
}

func (c *countingExecer) Exec(ctx context.Context, req protocol.Exec, stdout, stderr io.Writer) (protocol.ExitInfo, error) {
	c.execs++
	return c.Execer.Exec(ctx, req, stdout, stderr)
}

// TestGoFirstBuildIsSeeded: the first Go cell of a fresh session must not
// compile the standard library (about 12 s, often over the default time
// limit); the seed that scripts/deps installs makes it well under a few
// seconds.
func TestGoFirstBuildIsSeeded(t *testing.T) {
	b := newBackend(t)
	if _, err := os.Stat(GoCacheSeed + "/README"); err != nil {
		t.Skipf("no Go cache seed at %s: scripts/deps builds it", GoCacheSeed)
	}
	sb := newSandbox(t, b, native.Spec{})
	src := "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n)\n\nfunc main() {\n\tb, _ := json.Marshal([]int{1, 2})\n\tfmt.Println(string(b))\n}\n"
	var out bytes.Buffer
	start := time.Now()
	res, err := Run(context.Background(), sb.Agent, Program{Language: lng("go"), Files: []File{{Path: "main.go", Data: []byte(src)}}}, &out, io.Discard)
	took := time.Since(start)
	if err != nil || res.Exit.Code != 0 || out.String() != "[1,2]\n" {
		t.Fatalf("first Go build: %v, %+v, %q, log %s", err, res.Exit, out.String(), res.CompileLog)
	}
	if took > 5*time.Second {
		t.Errorf("the first Go build of a session took %v; the seeded cache should make it well under 5 s", took)
	}
	t.Logf("first Go build and run of a session: %v", took)
}
