// Package compat is the language compatibility suite for REPL kernels: each
// case runs in a kiln sandbox and directly on the host (the kernel started
// without a sandbox, as gVisor runs its tests natively and sandboxed), and
// both must give the same output. Program languages have their suite in
// internal/programs. Needs root for the sandboxes.
package compat

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/kernels/kerneltest"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

func TestMain(m *testing.M) {
	agent.Dispatch() // sandboxes re-execute this binary
	os.Exit(m.Run())
}

// outcome is what both sides must agree on.
type outcome struct {
	stdout    string
	result    string // text/plain of the execute_result, if any
	displays  string // text/plain of every rich output, in order
	errName   string
	errLine   int
	exitCode  int // -1 when the cell has none
	status    string
	artifacts []string // sandbox only; on the host, the files must exist
}

type sandboxSide struct {
	s    *engine.Session
	lang string
}

func (x sandboxSide) run(t *testing.T, code, stdin string, hasStdin bool) outcome {
	t.Helper()
	c := engine.Cell{Language: x.lang, Code: code}
	if hasStdin {
		c.Stdin = &stdin
	}
	res, err := x.s.Run(context.Background(), c, engine.Events{})
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	o := outcome{stdout: res.Stdout, status: string(res.Status), exitCode: -1}
	for _, out := range res.Outputs {
		if out.Result {
			o.result = engine.Text(out)
		}
		o.displays += engine.Text(out) + "\n"
	}
	if res.Error != nil {
		o.errName, o.errLine = res.Error.Name, res.Error.Line
	}
	if res.ExitCode != nil {
		o.exitCode = *res.ExitCode
	}
	for _, a := range res.Artifacts {
		o.artifacts = append(o.artifacts, a.Change+" "+a.Path)
	}
	return o
}

func (x sandboxSide) upload(t *testing.T, name, data string) {
	if err := x.s.Agent().WriteFile(context.Background(), name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

type hostSide struct {
	k   *kerneltest.Kernel
	dir string
}

func (x hostSide) run(t *testing.T, code, stdin string, hasStdin bool) outcome {
	t.Helper()
	res := x.k.ExecWith(kernelproto.Execute{Code: code, Stdin: stdin, HasStdin: hasStdin}, time.Minute)
	o := outcome{stdout: res.Stdout, status: res.Status, exitCode: -1}
	for _, d := range res.Results {
		o.result = kerneltest.Text(t, d)
	}
	for _, d := range res.Displays {
		o.displays += kerneltest.Text(t, d) + "\n"
	}
	if res.Error != nil {
		o.errName, o.errLine = res.Error.Name, res.Error.Line
	}
	if res.ExitCode != nil {
		o.exitCode = *res.ExitCode
	}
	return o
}

func (x hostSide) upload(t *testing.T, name, data string) {
	if err := os.WriteFile(filepath.Join(x.dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// compatCase is one case; code maps a language to its cell (absent: the
// case does not apply, and the reason is in skipWhy).
type compatCase struct {
	name     string
	upload   map[string]string // files put in the workspace first
	code     map[string]string
	stdin    *string
	want     func(t *testing.T, language string, o outcome)
	artifact string // a file the cell writes
}

func str(s string) *string { return &s }

var cases = []compatCase{
	{
		name: "hello",
		code: map[string]string{
			"python": `print("hello, world")`, "javascript": `console.log("hello, world")`,
			"typescript": `console.log("hello, world")`, "bash": `echo "hello, world"`,
			"sql": `SELECT 'hello, world' AS greeting;`, "postgres": `SELECT 'hello, world' AS greeting;`,
		},
		want: func(t *testing.T, l string, o outcome) {
			if !strings.Contains(o.stdout+o.displays, "hello, world") {
				t.Errorf("no greeting: %+v", o)
			}
		},
	},
	{
		name: "unicode",
		code: map[string]string{
			"python": `print("héllo wörld ✓ 日本")`, "javascript": `console.log("héllo wörld ✓ 日本")`,
			"typescript": `console.log("héllo wörld ✓ 日本")`, "bash": `echo "héllo wörld ✓ 日本"`,
		},
		want: func(t *testing.T, l string, o outcome) {
			if o.stdout != "héllo wörld ✓ 日本\n" {
				t.Errorf("stdout %q", o.stdout)
			}
		},
	},
	{
		name:  "stdin",
		stdin: str("line one\nline two\n"),
		code: map[string]string{
			"python":     "import sys\nprint(sys.stdin.read().upper(), end='')",
			"javascript": "let d = ''\nfor await (const c of process.stdin) d += c\nconsole.log(d.toUpperCase().trimEnd())",
			"typescript": "let d: string = ''\nfor await (const c of process.stdin) d += c\nconsole.log(d.toUpperCase().trimEnd())",
			"bash":       "tr a-z A-Z",
		},
		want: func(t *testing.T, l string, o outcome) {
			if o.stdout != "LINE ONE\nLINE TWO\n" {
				t.Errorf("stdout %q", o.stdout)
			}
		},
	},
	{
		name: "exit-code",
		code: map[string]string{"bash": "false\n(exit 3)"},
		want: func(t *testing.T, l string, o outcome) {
			if o.exitCode != 3 || o.status != "error" {
				t.Errorf("exit code %d status %s, want 3 and error", o.exitCode, o.status)
			}
		},
	},
	{
		name: "syntax-error",
		code: map[string]string{
			"python": "x = 1\ny = (2 +\nz = 3\n\n", "javascript": "let a = 1;\nlet b = ;\n",
			"typescript": "let a = 1;\nlet b = ;\n", "bash": "echo ok\nif then fi\n",
			"sql": "SELECT 1;\nSELEC 2;", "postgres": "SELECT 1;\nSELEC 2;",
		},
		want: func(t *testing.T, l string, o outcome) {
			if o.status != "error" || o.errName == "" || o.errLine < 2 {
				t.Errorf("want an error at line 2 or later, got %+v", o)
			}
			if strings.Contains(o.stdout, "ok") && l == "bash" {
				t.Errorf("bash ran a cell with a syntax error: %q", o.stdout)
			}
		},
	},
	{
		name: "runtime-error",
		code: map[string]string{
			"python": "a = [1]\nb = a[5]", "javascript": "const a = null;\na.field;",
			"typescript": "const a: any = null;\na.field;", "sql": "SELECT 1;\nSELECT * FROM no_such_table;",
			"postgres": "SELECT 1;\nSELECT * FROM no_such_table;",
		},
		want: func(t *testing.T, l string, o outcome) {
			if o.status != "error" || o.errName == "" || o.errLine != 2 {
				t.Errorf("want an error at line 2, got %+v", o)
			}
		},
	},
	{
		name:   "read-upload",
		upload: map[string]string{"data.txt": "3\n4\n"},
		code: map[string]string{
			"python":     "print(sum(int(x) for x in open('data.txt')))",
			"javascript": "console.log(require('fs').readFileSync('data.txt', 'utf8').trim().split('\\n').map(Number).reduce((a, b) => a + b))",
			"typescript": "console.log(require('fs').readFileSync('data.txt', 'utf8').trim().split('\\n').map(Number).reduce((a: number, b: number) => a + b))",
			"bash":       "echo $(( $(paste -sd+ data.txt) ))",
		},
		want: func(t *testing.T, l string, o outcome) {
			if o.stdout != "7\n" {
				t.Errorf("stdout %q", o.stdout)
			}
		},
	},
	{
		name:     "write-artifact",
		artifact: "out.txt",
		code: map[string]string{
			"python": "open('out.txt', 'w').write('made')", "javascript": "require('fs').writeFileSync('out.txt', 'made')",
			"typescript": "require('fs').writeFileSync('out.txt', 'made')", "bash": "printf made > out.txt",
			"sql": "ATTACH DATABASE 'out.txt' AS other;\nCREATE TABLE other.t (x);",
		},
		want: func(t *testing.T, l string, o outcome) {
			if o.status != "ok" {
				t.Errorf("status %s: %+v", o.status, o)
			}
		},
	},
	{
		name: "multi-file",
		upload: map[string]string{
			"helper.py": "def triple(x):\n    return 3 * x\n", "helper.js": "exports.triple = x => 3 * x;\n",
			"helper.sh": "triple() { echo $(( 3 * $1 )); }\n",
		},
		code: map[string]string{
			"python": "from helper import triple\nprint(triple(14))", "javascript": "console.log(require('./helper.js').triple(14))",
			"typescript": "console.log(require('./helper.js').triple(14))", "bash": "source ./helper.sh\ntriple 14",
		},
		want: func(t *testing.T, l string, o outcome) {
			if o.stdout != "42\n" {
				t.Errorf("stdout %q", o.stdout)
			}
		},
	},
	{
		name: "state",
		code: map[string]string{
			"python": "n = 41", "javascript": "let n = 41", "typescript": "let n: number = 41", "bash": "n=41",
			"sql":      "CREATE TABLE IF NOT EXISTS state (n); DELETE FROM state; INSERT INTO state VALUES (41);",
			"postgres": "CREATE TABLE IF NOT EXISTS state (n int); DELETE FROM state; INSERT INTO state VALUES (41);",
		},
		want: func(t *testing.T, l string, o outcome) {
			if o.status != "ok" {
				t.Errorf("status %s", o.status)
			}
		},
	},
	{
		name: "state-read",
		code: map[string]string{
			"python": "print(n + 1)", "javascript": "console.log(n + 1)", "typescript": "console.log(n + 1)",
			"bash": "echo $((n + 1))", "sql": "SELECT n + 1 AS answer FROM state;", "postgres": "SELECT n + 1 AS answer FROM state;",
		},
		want: func(t *testing.T, l string, o outcome) {
			if !strings.Contains(o.stdout+o.displays, "42") {
				t.Errorf("state did not carry over: %+v", o)
			}
		},
	},
}

// replLanguages are the languages with a kernel.
var replLanguages = []string{"python", "javascript", "typescript", "bash", "sql", "postgres"}

func TestREPLCompatibility(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
	b, err := native.New(native.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(b, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, language := range replLanguages {
		t.Run(language, func(t *testing.T) {
			l, _ := lang.Lookup(language)
			spec, ok := l.KernelSpec()
			if !ok || len(spec.Argv) == 0 {
				t.Fatalf("%s has no kernel", language)
			}
			s, err := e.NewSession(context.Background(), engine.SessionSpec{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			dir := t.TempDir()
			os.Chmod(dir, 0o777)
			spec.Env = append(append([]string{}, l.Env...), spec.Env...)
			host := hostSide{k: kerneltest.Start(t, hostArgv(t, language, spec.Argv, dir), spec.Env, dir), dir: dir}
			box := sandboxSide{s: s, lang: language}
			for _, c := range cases {
				code, ok := c.code[language]
				if !ok {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					for name, data := range c.upload {
						box.upload(t, name, data)
						host.upload(t, name, data)
					}
					stdin, has := "", c.stdin != nil
					if has {
						stdin = *c.stdin
					}
					got := box.run(t, code, stdin, has)
					want := host.run(t, code, stdin, has)
					c.want(t, language, got)
					if got.stdout != want.stdout || got.result != want.result || got.displays != want.displays || got.errName != want.errName ||
						got.errLine != want.errLine || got.exitCode != want.exitCode || got.status != want.status {
						t.Errorf("sandbox and host differ:\nsandbox %+v\nhost    %+v", got, want)
					}
					if c.artifact != "" {
						if !contains(got.artifacts, "created "+c.artifact) {
							t.Errorf("artifacts %v lack %s", got.artifacts, c.artifact)
						}
						if _, err := os.Stat(filepath.Join(dir, c.artifact)); err != nil {
							t.Errorf("on the host the cell did not write %s: %v", c.artifact, err)
						}
					}
				})
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestREPLLimitsAndControl covers what only the sandbox has: a timeout, an
// output flood, interrupt that keeps state, restart that clears it.
func TestREPLLimitsAndControl(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
	b, err := native.New(native.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(b, slog.New(slog.NewTextHandler(io.Discard, nil)))
	loops := map[string]string{
		"python": "while True: pass", "javascript": "while (true) {}", "typescript": "while (true) {}",
		"bash": "while true; do :; done", "sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c;",
		"postgres": "SELECT pg_sleep(60);",
	}
	floods := map[string]string{
		"python": "while True: print('x' * 1000)", "javascript": "while (true) console.log('x'.repeat(1000))",
		"typescript": "while (true) console.log('x'.repeat(1000))", "bash": "yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	}
	set := map[string][2]string{
		"python": {"kept = 7", "print(kept)"}, "javascript": {"var kept = 7", "console.log(kept)"},
		"typescript": {"var kept: number = 7", "console.log(kept)"}, "bash": {"kept=7", "echo $kept"},
	}
	for _, language := range replLanguages {
		t.Run(language, func(t *testing.T) {
			s, err := e.NewSession(context.Background(), engine.SessionSpec{Limits: kiln.Limits{OutputBytes: 64 * kiln.KiB}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			ctx := context.Background()
			if sv, ok := set[language]; ok {
				if r, err := s.Run(ctx, engine.Cell{Language: language, Code: sv[0]}, engine.Events{}); err != nil || r.Status != kiln.StatusOK {
					t.Fatalf("setting state: %+v %v", r, err)
				}
			}
			start := time.Now()
			r, err := s.Run(ctx, engine.Cell{Language: language, Code: loops[language], Timeout: time.Second}, engine.Events{})
			if err != nil || r.Status != kiln.StatusTimeout || time.Since(start) > 5*time.Second {
				t.Errorf("timeout: %+v after %v, %v", r.Status, time.Since(start), err)
			}
			go func() {
				time.Sleep(700 * time.Millisecond)
				s.Interrupt()
			}()
			r, err = s.Run(ctx, engine.Cell{Language: language, Code: loops[language]}, engine.Events{})
			if err != nil || r.Status != kiln.StatusInterrupted {
				t.Errorf("interrupt: %+v %v", r.Status, err)
			}
			if flood, ok := floods[language]; ok {
				r, err = s.Run(ctx, engine.Cell{Language: language, Code: flood}, engine.Events{})
				if err != nil || r.Status != kiln.StatusOutput || len(r.Stdout) > 64*kiln.KiB {
					t.Errorf("flood: %s with %d bytes, %v", r.Status, len(r.Stdout), err)
				}
			}
			sv, ok := set[language]
			if !ok {
				return
			}
			if r, _ := s.Run(ctx, engine.Cell{Language: language, Code: sv[1]}, engine.Events{}); r.Stdout != "7\n" {
				t.Errorf("state after timeout and interrupt: %q (%s, %s)", r.Stdout, r.Status, r.Notice)
			}
			if err := s.Restart(ctx, language); err != nil {
				t.Fatal(err)
			}
			if r, _ := s.Run(ctx, engine.Cell{Language: language, Code: sv[1]}, engine.Events{}); r.Stdout == "7\n" {
				t.Errorf("restart kept state: %q", r.Stdout)
			}
		})
	}
}
