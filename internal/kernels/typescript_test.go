package kernels

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kernelproto"
)

func startTS(t *testing.T) *localKernel {
	t.Helper()
	if _, err := os.Stat(typescriptDir + "/package.json"); err != nil {
		t.Skipf("the TypeScript compiler is not installed: %v", err)
	}
	return startLocal(t, TypeScript(), "")
}

// cellError runs a cell that must fail and returns its error.
func cellError(t *testing.T, k *localKernel, code string) *kernelproto.Error {
	t.Helper()
	r := k.Exec(code)
	if r.Status != kernelproto.StatusError || r.Error == nil {
		t.Fatalf("cell %q: status %q, error %+v; want an error", code, r.Status, r.Error)
	}
	return r.Error
}

func TestTypeScriptReadyAndTimings(t *testing.T) {
	start := time.Now()
	k := startTS(t)
	ready := time.Since(start)
	if k.Ready.Language != "typescript" || !strings.HasPrefix(k.Ready.Version, "TypeScript 5") || !strings.Contains(k.Ready.Version, "Node.js v") {
		t.Errorf("ready = %+v, want language typescript, version TypeScript 5…, Node.js v…", k.Ready)
	}
	var times []time.Duration
	for _, code := range []string{"1+1", "1+1", "const n: number = 1; let s = 'x'", "interface Q { q: string }; const qq: Q = { q: s }", "qq.q.length + n"} {
		start = time.Now()
		result(t, k, code)
		times = append(times, time.Since(start))
	}
	t.Logf("typescript: ready %v; first 1+1 (waits for the compiler's warm-up) %v, again %v; declaration cells %v %v %v",
		ready, times[0], times[1], times[2], times[3], times[4])
}

func TestTypeScriptTypesAcrossCells(t *testing.T) {
	k := startTS(t)
	result(t, k, "interface P { x: number }; const p: P = {x: 1}")
	e := cellError(t, k, `const q: P = {x: "no"}`)
	if e.Name != "TSError" || e.Line != 1 || !strings.Contains(e.Message, "TS2322") || !strings.Contains(e.Message, "not assignable to type 'number'") {
		t.Errorf("error %s %q at line %d, want TSError TS2322 at line 1", e.Name, e.Message, e.Line)
	}
	if got := result(t, k, "p.x + 1"); got != "2" {
		t.Errorf("p.x + 1 shows %q, want 2", got)
	}
	// q was never declared: the failed cell did not run.
	if e := cellError(t, k, "q"); e.Name != "TSError" || !strings.Contains(e.Message, "Cannot find name 'q'") {
		t.Errorf("q: %s %q", e.Name, e.Message)
	}
	runSteps(t, k, []cellStep{
		{"function double(n: number): number { return n * 2 }\nclass Box<T> { constructor(public v: T) {} }\nenum Color { Red, Green }\ntype Pair = [string, number]", ""},
		{"const b: Box<string> = new Box('s'); const pr: Pair = ['a', double(2)]; b.v + pr[1] + Color[Color.Green]", "'s4Green'"},
		{"const r = await new Promise<number>(res => setTimeout(() => res(41), 10)); r + 1", "42"},
		{"r.toFixed(1)", "'41.0'"},
		{"import * as os from 'os'; import { join } from 'path'; typeof os.platform() + join('a', 'b')", "'stringa/b'"},
		{"join('x', 'y')", "'x/y'"},
		{"(await import('node:path')).basename('/a/b')", "'b'"},
		{"{a: 1}", "{ a: 1 }"},
		{"let later: string | undefined; later ?? 'none'", "'none'"},
	})
	if e := cellError(t, k, "double('x')"); e.Name != "TSError" || !strings.Contains(e.Message, "TS2345") {
		t.Errorf("double('x'): %s %q", e.Name, e.Message)
	}
}

func TestTypeScriptRedeclare(t *testing.T) {
	k := startTS(t)
	runSteps(t, k, []cellStep{
		{"const a: number = 1; interface I { x: number }", ""},
		{"const a: string = 'again'; a.length", "5"},
		{"interface I { y: string }; const i: I = { y: 'y' }; i.y", "'y'"},
		{"let console2 = console; const process = 1; process", "1"},
	})
	if e := cellError(t, k, "const j: I = { x: 1 }"); e.Name != "TSError" {
		t.Errorf("the old I is still known: %s %q", e.Name, e.Message)
	}
}

func TestTypeScriptTypeErrorsDoNotRun(t *testing.T) {
	k := startTS(t)
	r := k.Exec("console.log('ran')\nlet n: number = 'x'\nlet m: string = 5")
	if r.Status != kernelproto.StatusError || r.Stdout != "" {
		t.Fatalf("status %q, stdout %q; want an error and no output", r.Status, r.Stdout)
	}
	e := r.Error
	if e.Name != "TSError" || e.Line != 2 || !strings.Contains(e.Message, "2:5 TS2322") || !strings.Contains(e.Message, "3:5 TS2322") {
		t.Errorf("error %s %q at line %d, want both diagnostics, first at line 2", e.Name, e.Message, e.Line)
	}
	if tb := strings.Join(e.Traceback, "\n"); !strings.Contains(tb, "<cell 1>:2") || !strings.Contains(tb, "<cell 1>:3") || !strings.Contains(tb, "let m: string = 5") {
		t.Errorf("traceback:\n%s", tb)
	}
}

func TestTypeScriptErrors(t *testing.T) {
	k := startTS(t)
	for _, tc := range []struct {
		code   string
		name   string
		line   int
		frames []string
	}{
		{"interface A { x: number }\ntype B = string\n// comment\nconst a: A = { x: 1 }\nfunction boom(n: number): never {\n  throw new Error('boom ' + n)\n}\nboom(a.x)",
			"Error", 6, []string{"at boom (<cell 1>:6:9)", "at <cell 1>:8:1"}},
		{"const v: number = await Promise.resolve(1)\ntype T = { a: string }\n\nconst o: T | null = null as T | null\no!.a", "TypeError", 5, []string{"at <cell 2>:5:4"}},
		{"boom(2)", "Error", 1, []string{"at boom (<cell 1>:6:9)", "at <cell 3>:1:1"}},
		{"let x: = 1", "SyntaxError", 1, []string{"<cell 4>:1", "let x: = 1", "       ^"}},
		{"const ok = 1\nfoo(", "SyntaxError", 2, nil},
	} {
		e := cellError(t, k, tc.code)
		tb := strings.Join(e.Traceback, "\n")
		if e.Name != tc.name || e.Line != tc.line {
			t.Errorf("%q: %s %q at line %d, want %s at line %d\n%s", tc.code, e.Name, e.Message, e.Line, tc.name, tc.line, tb)
		}
		at := 0
		for _, f := range tc.frames {
			i := strings.Index(tb[at:], f)
			if i < 0 {
				t.Errorf("%q: traceback\n%s\nlacks %q (in order)", tc.code, tb, f)
				break
			}
			at += i + len(f)
		}
	}
}

func TestTypeScriptCheckAndComplete(t *testing.T) {
	k := startTS(t)
	result(t, k, "interface Shape { area(): number }; const circle = { radius: 2, area() { return 12 } }")
	for _, tc := range []struct {
		code         string
		status       string
		line, column int
	}{
		{"const x: number = 1", "complete", 0, 0},
		{"const x: number = 'wrong type, still complete'", "complete", 0, 0},
		{"interface A {", "incomplete", 0, 0},
		{"function f(a: number) {\n  return a", "incomplete", 0, 0},
		{"await foo(", "incomplete", 0, 0},
		{"let x: = 1", "invalid", 1, 8},
	} {
		var c kernelproto.CheckResult
		mustUnmarshal(t, k.Request(kernelproto.Check{Type: kernelproto.TCheck, Cell: "q", Code: tc.code}), &c)
		if c.Status != tc.status || c.Line != tc.line || c.Column != tc.column {
			t.Errorf("check %q = %+v, want %s at %d:%d", tc.code, c, tc.status, tc.line, tc.column)
		}
	}
	for _, tc := range []struct {
		code string
		want string
	}{
		{"circle.ra", "radius"},
		{"Sha", "Shape"},
		{"Math.fl", "floor"},
	} {
		var c kernelproto.Completion
		mustUnmarshal(t, k.Request(kernelproto.Complete{Type: kernelproto.TComplete, Cell: "q", Code: tc.code, Cursor: len(tc.code)}), &c)
		found := false
		for _, m := range c.Matches {
			found = found || m == tc.want
		}
		if !found {
			t.Errorf("complete %q: %v lack %q", tc.code, c.Matches, tc.want)
		}
	}
}

func TestTypeScriptInterrupt(t *testing.T) {
	k := startTS(t)
	result(t, k, "let kept: number = 42")
	for _, code := range []string{"while (true) {}", "await null; for (;;) {}"} {
		r, latency := interruptAfter(t, k, code, 300*time.Millisecond)
		if r.Status != kernelproto.StatusInterrupted {
			t.Fatalf("%q: status %q, error %+v; want interrupted", code, r.Status, r.Error)
		}
		t.Logf("%q: done %v after the interrupt", code, latency)
	}
	if got := result(t, k, "kept"); got != "42" {
		t.Errorf("after interrupts, kept = %q", got)
	}
}

func TestTypeScriptOutputAndDisplay(t *testing.T) {
	k := startTS(t)
	r := k.Exec("console.log('out'); console.error('err'); display.html('<b>x</b>'); const n: number = 3; n")
	if r.Status != kernelproto.StatusOK || r.Stdout != "out\n" || r.Stderr != "err\n" || len(r.Displays) != 2 || text(t, r.Results[0]) != "3" {
		t.Errorf("status %q, stdout %q, stderr %q, displays %+v", r.Status, r.Stdout, r.Stderr, r.Displays)
	}
}

func TestTypeScriptWithoutCompiler(t *testing.T) {
	spec := TypeScript()
	spec.Env = append(spec.Env, "KILN_TYPESCRIPT=/nonexistent")
	k := startLocal(t, spec, "")
	if !strings.Contains(k.Ready.Version, "TypeScript missing") {
		t.Errorf("ready version %q", k.Ready.Version)
	}
	if e := cellError(t, k, "1+1"); !strings.Contains(e.Message, "TypeScript compiler is not installed") {
		t.Errorf("error %s %q", e.Name, e.Message)
	}
}
