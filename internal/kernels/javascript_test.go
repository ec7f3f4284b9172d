package kernels

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kernelproto"
)

func startJS(t *testing.T) *localKernel {
	t.Helper()
	return startLocal(t, JavaScript(), "")
}

// result returns the text/plain of the cell's execute_result, "" if none,
// failing the test if the cell did not end ok.
func result(t *testing.T, k *localKernel, code string) string {
	t.Helper()
	r := k.Exec(code)
	if r.Status != kernelproto.StatusOK {
		t.Fatalf("cell %q: status %q, error %+v, stderr %q", code, r.Status, r.Error, r.Stderr)
	}
	switch len(r.Results) {
	case 0:
		return ""
	case 1:
		return text(t, r.Results[0])
	}
	t.Fatalf("cell %q: %d execute_results", code, len(r.Results))
	return ""
}

// cellStep is one cell of a sequence and the text/plain it should show.
type cellStep struct{ code, want string }

func runSteps(t *testing.T, k *localKernel, steps []cellStep) {
	t.Helper()
	for _, s := range steps {
		if got := result(t, k, s.code); got != s.want {
			t.Errorf("cell %q shows %q, want %q", s.code, got, s.want)
		}
	}
}

func TestJavaScriptReadyAndTimings(t *testing.T) {
	start := time.Now()
	k := startJS(t)
	ready := time.Since(start)
	if k.Ready.Language != "javascript" || !strings.HasPrefix(k.Ready.Version, "Node.js v") {
		t.Errorf("ready = %+v, want language javascript, version Node.js v…", k.Ready)
	}
	start = time.Now()
	if got := result(t, k, "1+1"); got != "2" {
		t.Errorf("1+1 shows %q, want 2", got)
	}
	first := time.Since(start)
	start = time.Now()
	result(t, k, "1+1")
	again := time.Since(start)
	start = time.Now()
	result(t, k, "const declared = 1; let other = 2")
	decl := time.Since(start)
	start = time.Now()
	result(t, k, "await null; 1")
	tla := time.Since(start)
	start = time.Now()
	result(t, k, "await null; 2")
	tla2 := time.Since(start)
	t.Logf("javascript: ready %v; 1+1 %v, again %v; first declaration cell %v; first top-level await cell (loads the parser) %v, again %v",
		ready, first, again, decl, tla, tla2)
}

func TestJavaScriptStatePersists(t *testing.T) {
	k := startJS(t)
	runSteps(t, k, []cellStep{
		{"const a = 1; let b = 2; class C {}; function f(){return 3}", ""},
		{"a + b + f() + (new C() ? 1 : 0)", "7"},
		// Declared again, as in Node's REPL.
		{"const a = 10; a", "10"},
		{"let b = 'x'; b", "'x'"},
		{"class C { v = 5 }; new C().v", "5"},
		{"var v = 1; function f() { return 4 }; f() + v", "5"},
		{"globalThis.a + b", "'10x'"},
	})
}

// TestJavaScriptDeclarations covers the rewriting of top-level
// declarations: what must change and what must not.
func TestJavaScriptDeclarations(t *testing.T) {
	k := startJS(t)
	runSteps(t, k, []cellStep{
		{"let s = 'let x = 1; const y'; let t = `class ${ {k: `const ${1}`}.k } z`; const r = /let {/g; [s, t, r.source]",
			"[ 'let x = 1; const y', 'class const 1 z', 'let {' ]"},
		{"let u, v = 5, w\nlet q\n[u, v, w, q]", "[ undefined, 5, undefined, undefined ]"},
		{"let u; u", ""},
		{"let {p, z: [zz]} = {p: 1, z: [2]}; p + zz", "3"},
		{"class K extends Array { static m() { return {x: 1} } }\nconst k = K.m()\nk.x", "1"},
		{"class\nNL {}\nnew NL() instanceof NL", "true"},
		{"if (true) { let inner = 1 }; typeof inner", "'undefined'"},
		{"for (const i of [1, 2]) {}; let i2 = 1 /* let no */ // const\n; typeof i + i2", "'undefined1'"},
		{"const fn = (a, b) => a + b, g2 = 3\nfn(1, g2)", "4"},
		{"let x = 10\n/2/1\nx", "5"},
		{"let obj = {class: 1, let: 2, const: 3}; obj.class + obj.let + obj.const", "6"},
		{"const big = 1; big = 2", "2"},
		{"function outer() { const hidden = 1; return hidden }; outer() + typeof hidden", "'1undefined'"},
	})
}

func TestJavaScriptTopLevelAwait(t *testing.T) {
	k := startJS(t)
	runSteps(t, k, []cellStep{
		{"await new Promise(r => setTimeout(r, 10)); 5", "5"},
		{"const x = await Promise.resolve(2); function g() { return x * 3 }; class D { v = 1 }; let {y} = {y: 4}; let none\nx", "2"},
		{"g() + new D().v + y + String(none)", "'11undefined'"},
		{"const x = await 7; x", "7"},
		{"await 0; let q3\n[2, q3]", "[ 2, undefined ]"},
		{"await 0; x * 2", "14"},
	})
	r := k.Exec("for await (const v of (async function* () { yield 1; yield 2 })()) console.log(v)")
	if r.Status != kernelproto.StatusOK || r.Stdout != "1\n2\n" {
		t.Errorf("for await: status %q, stdout %q; want ok, \"1\\n2\\n\"", r.Status, r.Stdout)
	}
}

func TestJavaScriptOutputIsFlushed(t *testing.T) {
	k := startJS(t)
	r := k.Exec("console.log('out'); console.error('err'); process.stdout.write('x'.repeat(1 << 20)); console.log(); console.info('end')")
	want := "out\n" + strings.Repeat("x", 1<<20) + "\nend\n"
	if r.Status != kernelproto.StatusOK || r.Stdout != want || r.Stderr != "err\n" {
		t.Errorf("status %q, %d bytes of stdout (want %d), stderr %q", r.Status, len(r.Stdout), len(want), r.Stderr)
	}
	r = k.Exec("await new Promise(r => setTimeout(r, 10)); console.log('after await'); process.stderr.write('e'.repeat(100000))")
	if r.Stdout != "after await\n" || len(r.Stderr) != 100000 {
		t.Errorf("after await: stdout %q, %d bytes of stderr", r.Stdout, len(r.Stderr))
	}
}

func TestJavaScriptResults(t *testing.T) {
	k := startJS(t)
	for _, tc := range []cellStep{
		{"'abc'", "'abc'"},
		{"undefined", ""},
		{"null", "null"},
		{"{a: 1}", "{ a: 1 }"},
		{"{a: 1, b: [1, 2]}", "{ a: 1, b: [ 1, 2 ] }"},
		{"[1, 2]", "[ 1, 2 ]"},
		{"1n", "1n"},
		{"new Map([[1, 2]])", "Map(1) { 1 => 2 }"},
		{"let z = 1", ""},
		{"z = 3", "3"},
		{"if (z) { 'then' } else { 'else' }", "'then'"},
		{"console.log('x')", ""},
	} {
		if got := result(t, k, tc.code); got != tc.want {
			t.Errorf("%q shows %q, want %q", tc.code, got, tc.want)
		}
	}
}

func TestJavaScriptDisplay(t *testing.T) {
	k := startJS(t)
	r := k.Exec(`display(1, 'two')
display.html('<b>x</b>')
display.markdown('# t')
display.svg('<svg/>')
display.png(Buffer.from([1, 2, 3]))
display.json({a: [1]})
display.mime({'text/html': '<i>y</i>'})
display.text('plain')
;({ _repr_html_() { return '<p>r</p>' } })`)
	if r.Status != kernelproto.StatusOK {
		t.Fatalf("status %q, error %+v", r.Status, r.Error)
	}
	type shown struct{ mime, data string }
	var got []shown
	for _, d := range r.Displays {
		for mime, raw := range d.Data {
			if mime != "text/plain" || len(d.Data) == 1 {
				got = append(got, shown{mime, string(raw)})
			}
		}
	}
	want := []shown{
		{"text/plain", `"1"`},
		{"text/plain", `"'two'"`},
		{"text/html", `"\u003cb\u003ex\u003c/b\u003e"`},
		{"text/markdown", `"# t"`},
		{"image/svg+xml", `"\u003csvg/\u003e"`},
		{"image/png", `"AQID"`},
		{"application/json", `{"a":[1]}`},
		{"text/html", `"\u003ci\u003ey\u003c/i\u003e"`},
		{"text/plain", `"plain"`},
		{"text/html", `"\u003cp\u003er\u003c/p\u003e"`},
	}
	if len(got) != len(want) {
		t.Fatalf("displays %+v, want %+v", got, want)
	}
	for i := range want {
		var g, w any
		json.Unmarshal([]byte(got[i].data), &g)
		json.Unmarshal([]byte(want[i].data), &w)
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if got[i].mime != want[i].mime || string(gb) != string(wb) {
			t.Errorf("display %d: %s %s, want %s %s", i, got[i].mime, gb, want[i].mime, wb)
		}
	}
	for _, d := range r.Displays {
		if _, ok := d.Data["text/plain"]; !ok {
			t.Errorf("display %v has no text/plain", d.Data)
		}
	}
	if len(r.Results) != 1 || r.Results[0].Data["text/html"] == nil {
		t.Errorf("execute_result %+v, want one with text/html", r.Results)
	}
}

func TestJavaScriptErrors(t *testing.T) {
	k := startJS(t)
	result(t, k, "function bad(o) {\n  return o.x.y\n}") // c1
	for _, tc := range []struct {
		code     string
		name     string
		line     int
		frames   []string // in the traceback, in order
		messageS string   // in the message
	}{
		{"let q = 1;\n\nbad({})", "TypeError", 3, []string{"at bad (<cell 1>:2:14)", "at <cell 2>:3:1"}, "reading 'y'"},
		{"class A {}; const o = null; o.x", "TypeError", 1, []string{"at <cell 3>:1:31"}, "reading 'x'"},
		{"const v = await Promise.resolve(1)\n\nnull.x", "TypeError", 3, []string{"at <cell 4>:3:6"}, "reading 'x'"},
		{"await null\nthrow new RangeError('deep')", "RangeError", 2, []string{"at <cell 5>:2:7"}, "deep"},
		{"foo(1,\n  bar))", "SyntaxError", 2, []string{"<cell 6>:2", "  bar))", "      ^"}, "Unexpected token ')'"},
		{"const a = 1;\nlet = = 2", "SyntaxError", 2, nil, "Unexpected token"},
		{"await null;\nlet = = 2", "SyntaxError", 2, nil, ""},
		{"throw 5", "Uncaught", 0, nil, "5"},
		{"require('nonexistent-module')", "Error", 1, []string{"at <cell 10>:1:1"}, "Cannot find module"},
	} {
		r := k.Exec(tc.code)
		if r.Status != kernelproto.StatusError || r.Error == nil {
			t.Errorf("%q: status %q, error %+v; want an error", tc.code, r.Status, r.Error)
			continue
		}
		e := r.Error
		tb := strings.Join(e.Traceback, "\n")
		if e.Name != tc.name || e.Line != tc.line || !strings.Contains(e.Message, tc.messageS) {
			t.Errorf("%q: error %s %q at line %d, want %s %q at line %d", tc.code, e.Name, e.Message, e.Line, tc.name, tc.messageS, tc.line)
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
		for _, l := range e.Traceback {
			if strings.HasPrefix(strings.TrimSpace(l), "at ") && (strings.Contains(l, "[eval]") || strings.Contains(l, "node:vm")) {
				t.Errorf("%q: traceback shows the kernel's frames:\n%s", tc.code, tb)
			}
		}
	}
	if got := result(t, k, "bad({x: {y: 'still here'}})"); got != "'still here'" {
		t.Errorf("after errors: %q", got)
	}
}

func TestJavaScriptBackgroundErrors(t *testing.T) {
	k := startJS(t)
	// The timer leaves 100 ms for the second cell to start: enough on a
	// loaded CI machine (10 ms was not).
	r1 := k.Exec("setTimeout(() => { throw new Error('late') }, 100); Promise.reject(new Error('rejected')); 1")
	r2 := k.Exec("await new Promise(r => setTimeout(r, 600)); 'alive'")
	if r1.Status != kernelproto.StatusOK || r2.Status != kernelproto.StatusOK || text(t, r2.Results[0]) != "'alive'" {
		t.Fatalf("statuses %q %q, results %+v", r1.Status, r2.Status, r2.Results)
	}
	// The rejection is the first cell's; the timer fires during the second.
	if want := "Unhandled promise rejection: Error: rejected"; !strings.Contains(r1.Stderr, want) {
		t.Errorf("first cell's stderr %q lacks %q", r1.Stderr, want)
	}
	for _, want := range []string{"Uncaught Error: late", "at Timeout._onTimeout (<cell 1>:1:26)"} {
		if !strings.Contains(r2.Stderr, want) {
			t.Errorf("second cell's stderr %q lacks %q", r2.Stderr, want)
		}
	}
}

func TestJavaScriptInterrupt(t *testing.T) {
	k := startJS(t)
	result(t, k, "let kept = 42")
	for _, tc := range []struct{ name, code string }{
		{"synchronous loop", "while (true) {}"},
		{"loop after await", "let z = 0; await null; while (true) {}"},
		{"loop after a timer", "await new Promise(r => setTimeout(r, 10)); for (;;) {}"},
		{"loop in an awaited async function", "async function spin() { await new Promise(r => setTimeout(r, 10)); for (;;) {} }\nawait spin()"},
		{"awaiting forever", "await new Promise(() => {})"},
		{"loop in a called function", "function busy() { while (true) {} }\nbusy()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, latency := interruptAfter(t, k, tc.code, 300*time.Millisecond)
			if r.Status != kernelproto.StatusInterrupted {
				t.Fatalf("status %q, error %+v; want interrupted", r.Status, r.Error)
			}
			t.Logf("done %v after the interrupt", latency)
			if got := result(t, k, "kept"); got != "42" {
				t.Errorf("after the interrupt, kept = %q", got)
			}
		})
	}
	k.Interrupt() // while idle
	time.Sleep(200 * time.Millisecond)
	if got := result(t, k, "kept + 1"); got != "43" {
		t.Errorf("after an idle interrupt, kept + 1 = %q", got)
	}
	// An interrupt that was answered must not end a later cell.
	interruptAfter(t, k, "await new Promise(() => {})", 100*time.Millisecond)
	if got := result(t, k, "const t0 = Date.now(); while (Date.now() - t0 < 500) {}; 'finished'"); got != "'finished'" {
		t.Errorf("a busy cell after an interrupt shows %q", got)
	}
}

// interruptAfter runs a cell and interrupts it after d; it fails the test
// if the cell ends before the interrupt, and returns how long the kernel
// took to answer it.
func interruptAfter(t *testing.T, k *localKernel, code string, d time.Duration) (cellResult, time.Duration) {
	t.Helper()
	sent := make(chan time.Time, 1)
	timer := time.AfterFunc(d, func() {
		sent <- time.Now()
		k.Interrupt()
	})
	defer timer.Stop()
	r := k.ExecWith(kernelproto.Execute{Code: code}, 10*time.Second)
	select {
	case at := <-sent:
		return r, time.Since(at)
	default:
		t.Fatalf("cell %q ended (%s) before the interrupt", code, r.Status)
	}
	return r, 0
}

func TestJavaScriptComplete(t *testing.T) {
	k := startJS(t)
	result(t, k, "const myObject = {alpha: 1, alpine: 2, beta: 3}; let myVariable = 1")
	for _, tc := range []struct {
		code       string
		cursor     int
		want       []string // among the matches
		start, end int
	}{
		{"Math.fl", 7, []string{"floor"}, 5, 7},
		{"myObj", 5, []string{"myObject"}, 0, 5},
		{"x = myVa", 8, []string{"myVariable"}, 4, 8},
		{"myObject.al", 11, []string{"alpha", "alpine"}, 9, 11},
		{"'é😀' + Math.ma", 14, []string{"max"}, 12, 14}, // cursors count code points
		{"process.std", 11, []string{"stdout", "stderr"}, 8, 11},
		{"Math.fl + 1", 7, []string{"floor"}, 5, 7},
	} {
		var c kernelproto.Completion
		mustUnmarshal(t, k.Request(kernelproto.Complete{Type: kernelproto.TComplete, Cell: "q", Code: tc.code, Cursor: tc.cursor}), &c)
		if c.Type != kernelproto.TCompletion || c.Cell != "q" || c.CursorStart != tc.start || c.CursorEnd != tc.end {
			t.Errorf("%q@%d: %+v, want cursor %d..%d", tc.code, tc.cursor, c, tc.start, tc.end)
		}
		for _, w := range tc.want {
			found := false
			for _, m := range c.Matches {
				found = found || m == w
			}
			if !found {
				t.Errorf("%q@%d: matches %v lack %q", tc.code, tc.cursor, c.Matches, w)
			}
		}
	}
	var c kernelproto.Completion
	mustUnmarshal(t, k.Request(kernelproto.Complete{Type: kernelproto.TComplete, Cell: "q", Code: "myObject.b", Cursor: 10}), &c)
	if len(c.Matches) != 1 || c.Matches[0] != "beta" {
		t.Errorf("myObject.b: matches %v, want [beta]", c.Matches)
	}
}

func TestJavaScriptCheck(t *testing.T) {
	k := startJS(t)
	for _, tc := range []struct {
		code         string
		status       string
		line, column int
	}{
		{"1 + 1", "complete", 0, 0},
		{"const a = 1; let b = 2", "complete", 0, 0},
		{"let x = 1; let x = 2", "complete", 0, 0},
		{"await x", "complete", 0, 0},
		{"if (x) {", "incomplete", 0, 0},
		{"foo(1,", "incomplete", 0, 0},
		{"[1, 2", "incomplete", 0, 0},
		{"`abc ${", "incomplete", 0, 0},
		{"function f() {\n  return 1", "incomplete", 0, 0},
		{"await foo(", "incomplete", 0, 0},
		{"import fs from 'fs'\nexport const x = 1", "complete", 0, 0},
		{"a b", "invalid", 1, 3},
		{"foo(1,\n  2))", "invalid", 2, 5},
		{"'unterminated", "invalid", 1, 1},
	} {
		var c kernelproto.CheckResult
		mustUnmarshal(t, k.Request(kernelproto.Check{Type: kernelproto.TCheck, Cell: "q", Code: tc.code}), &c)
		if c.Type != kernelproto.TCheckResult || c.Status != tc.status || c.Line != tc.line || c.Column != tc.column {
			t.Errorf("check %q = %+v, want %s at %d:%d", tc.code, c, tc.status, tc.line, tc.column)
		}
	}
}

func TestJavaScriptModules(t *testing.T) {
	k := startJS(t)
	runSteps(t, k, []cellStep{
		{"import fs from 'fs'; import {join as j} from 'path'; import * as os from 'os'\n[typeof fs.readFileSync, j('a', 'b'), typeof os.platform]",
			"[ 'function', 'a/b', 'function' ]"},
		{"fs.existsSync('.')", "true"},
		{"(await import('node:path')).basename('/a/b')", "'b'"},
		{"export const e = 1; export function ef() { return 2 }\ne + ef()", "3"},
	})
	r := k.Exec("(await import('node:os')).EOL")
	if strings.Contains(r.Stderr, "Warning") {
		t.Errorf("dynamic import warns: %q", r.Stderr)
	}
}

func TestJavaScriptStdin(t *testing.T) {
	k := startJS(t)
	code := "const lines = []; for await (const l of require('readline').createInterface({input: process.stdin})) lines.push(l); lines"
	r := k.ExecWith(kernelproto.Execute{Code: code, Stdin: "a\nb\n", HasStdin: true}, 10*time.Second)
	if r.Status != kernelproto.StatusOK || len(r.Results) != 1 || text(t, r.Results[0]) != "[ 'a', 'b' ]" {
		t.Errorf("with stdin: status %q, results %+v, error %+v", r.Status, r.Results, r.Error)
	}
	r = k.ExecWith(kernelproto.Execute{Code: code}, 10*time.Second)
	if r.Status != kernelproto.StatusError || r.Error == nil || !strings.Contains(r.Error.Message, "stdin is not available") {
		t.Errorf("without stdin: status %q, error %+v; want a stdin error at once", r.Status, r.Error)
	}
}

func TestJavaScriptRobustness(t *testing.T) {
	k := startJS(t)
	if _, err := k.Conn.Write([]byte("not json\n{\"type\": 5}\n[1,2]\n\n{\"type\":\"nonsense\"}\n")); err != nil {
		t.Fatal(err)
	}
	if got := result(t, k, "1+1"); got != "2" {
		t.Errorf("after bad lines, 1+1 shows %q", got)
	}
	r := k.Exec("display.html('x'.repeat(40 << 20)); 'small'")
	if r.Status != kernelproto.StatusOK || len(r.Displays) != 2 || !strings.Contains(text(t, r.Displays[0]), "not shown") {
		t.Errorf("oversized display: status %q, %d displays", r.Status, len(r.Displays))
	}
	if got := result(t, k, "'x'.repeat(10 << 20)"); len(got) > 1<<20 {
		t.Errorf("a 10 MiB string shows %d bytes", len(got))
	}
}

func TestJavaScriptProcessExitFlushes(t *testing.T) {
	k := startJS(t)
	result(t, k, "1")
	k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: "bye", Code: "display('before'); console.log('bye'); process.stdout.write('x'.repeat(100000)); process.exit(3)"})
	var msgs []string
	k.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		line, err := k.In.ReadBytes('\n')
		if err != nil {
			break
		}
		msgs = append(msgs, string(line))
	}
	if err := k.Cmd.Wait(); k.Cmd.ProcessState == nil || k.Cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("kernel exit: %v, want status 3", err)
	}
	k.WG.Wait()
	if len(msgs) != 1 || !strings.Contains(msgs[0], "before") {
		t.Errorf("messages %q, want the display", msgs)
	}
	if want := "bye\n" + strings.Repeat("x", 100000); k.Stdout.String() != want {
		t.Errorf("stdout has %d bytes, want %d", k.Stdout.Len(), len(want))
	}
}

func TestJavaScriptKernelSourceSize(t *testing.T) {
	// The source travels on the command line; one argument may be at most
	// 128 KiB on Linux.
	if n := len(nodeKernel); n > 80<<10 {
		t.Errorf("the node kernel is %d bytes; keep it well under 100 KiB", n)
	}
}

// TestJavaScriptWithoutTypeScript runs the kernel as if the TypeScript
// compiler were missing: declarations still persist and may be declared
// again, and top-level await still works (its declarations stay in the
// cell).
func TestJavaScriptWithoutTypeScript(t *testing.T) {
	spec := JavaScript()
	spec.Env = append(spec.Env, "KILN_TYPESCRIPT=/nonexistent")
	k := startLocal(t, spec, "")
	runSteps(t, k, []cellStep{
		{"const a = 1; class C {}", ""},
		{"const a = 2; a + (new C() ? 1 : 0)", "3"},
		{"await new Promise(r => setTimeout(r, 10)); a", "2"},
	})
	if r := k.Exec("import fs from 'fs'"); r.Status != kernelproto.StatusError || r.Error.Name != "SyntaxError" {
		t.Errorf("import without the parser: status %q, error %+v; want a SyntaxError", r.Status, r.Error)
	}
}

func TestJavaScriptCellsMayShadowGlobals(t *testing.T) {
	k := startJS(t)
	runSteps(t, k, []cellStep{
		{"const Map = 1, Set = 2, Promise = 3, Buffer = 4, JSON = 5, Error = 6, process = 7, require = 8; Map + Set + Promise + Buffer + JSON + Error + process + require", "36"},
		{"const display = 1; display", "1"},
	})
	if r := k.Exec("null.x"); r.Status != kernelproto.StatusError || r.Error.Name != "TypeError" || r.Error.Line != 1 {
		t.Errorf("after shadowing: status %q, error %+v", r.Status, r.Error)
	}
}

// TestJavaScriptCellNumbers: tracebacks name cells <cell N>, counted by
// the kernel, and a warm-up cell takes no number.
func TestJavaScriptCellNumbers(t *testing.T) {
	k := startJS(t)
	if r := k.ExecWith(kernelproto.Execute{Code: "1", Warmup: true}, time.Minute); r.Status != "ok" {
		t.Fatalf("warm-up cell: %+v", r)
	}
	for i, code := range []string{"null.x", "let y = 1\nnull.y"} {
		r := k.Exec(code)
		want := fmt.Sprintf("at <cell %d>:%d:", i+1, i+1)
		if r.Error == nil || !strings.Contains(strings.Join(r.Error.Traceback, "\n"), want) {
			t.Errorf("cell %d: error %+v, want a frame %q", i+1, r.Error, want)
		}
	}
}
