package kernels

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/kernelproto"
)

// startPython starts the Python kernel and fails the test when it is not
// Python's.
func startPython(t *testing.T) *localKernel {
	t.Helper()
	k := startLocal(t, Python(), "")
	if k.Ready.Language != "python" || !strings.HasPrefix(k.Ready.Version, "3.") {
		t.Fatalf("ready = %+v, want language python and a 3.x version", k.Ready)
	}
	return k
}

// pyOK runs a cell that must succeed and returns what it produced.
func pyOK(k *localKernel, code string) cellResult {
	k.T.Helper()
	r := k.Exec(code)
	if r.Status != kernelproto.StatusOK {
		k.T.Fatalf("cell %q: status %q, error %+v, stderr %q", code, r.Status, r.Error, r.Stderr)
	}
	return r
}

// pyValue runs a cell and returns the text/plain of its one execute_result.
func pyValue(k *localKernel, code string) string {
	k.T.Helper()
	r := pyOK(k, code)
	if len(r.Results) != 1 {
		k.T.Fatalf("cell %q: %d results, want 1 (displays %+v)", code, len(r.Results), r.Displays)
	}
	return text(k.T, r.Results[0])
}

// pySkipWithout skips the test when the kernel cannot import a module.
func pySkipWithout(t *testing.T, k *localKernel, module string) {
	t.Helper()
	r := k.Exec("import " + module)
	if r.Status != kernelproto.StatusOK {
		t.Skipf("%s is not installed for /usr/bin/python3: %+v", module, r.Error)
	}
}

func TestPythonSourceFitsCommandLine(t *testing.T) {
	if n := len(pythonSource); n == 0 || n > 100<<10 {
		t.Errorf("kernel source is %d bytes, want 1..100 KiB (it is one argv string)", n)
	}
	if strings.ContainsRune(pythonSource, 0) {
		t.Error("kernel source contains a NUL byte, which argv cannot carry")
	}
}

func TestPythonStartAndRoundTrip(t *testing.T) {
	t0 := time.Now()
	k := startPython(t)
	start := time.Since(t0)
	t.Logf("python %s: ready %v after start", k.Ready.Version, start)

	t1 := time.Now()
	if got := pyValue(k, "1+1"); got != "2" {
		t.Fatalf("1+1 = %q, want 2", got)
	}
	first := time.Since(t1)
	// execute → execute_result → done on the channel alone (exec also
	// waits for the output pipes to drain, which takes a few ms)
	var rtts []time.Duration
	for i := 0; i < 50; i++ {
		t2 := time.Now()
		k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: k.CellID(), Code: "1+1"})
		var d kernelproto.Display
		mustUnmarshal(t, k.Read(10*time.Second), &d)
		var done kernelproto.Done
		mustUnmarshal(t, k.Read(10*time.Second), &done)
		rtts = append(rtts, time.Since(t2))
		if text(t, d) != "2" || done.Status != kernelproto.StatusOK {
			t.Fatalf("1+1: %+v then %+v", d, done)
		}
	}
	slices.Sort(rtts)
	t.Logf("1+1 round trip: first cell %v (with exec's drain), then median %v of %d", first, rtts[len(rtts)/2], len(rtts))

	// heavy modules load when the user imports them, not at start
	if got := pyValue(k, "import sys\nsorted(m for m in ('asyncio', 'matplotlib', 'numpy', 'pandas') if m in sys.modules)"); got != "[]" {
		t.Errorf("modules loaded at start: %s, want none", got)
	}
}

func TestPythonStatePersists(t *testing.T) {
	k := startPython(t)
	if got := pyValue(k, "sorted(globals())"); got != "['__builtins__', '__doc__', '__loader__', '__name__', '__package__', '__spec__']" {
		t.Errorf("a fresh namespace holds %s; kernel internals must not show", got)
	}
	if got := pyValue(k, "__name__, __builtins__ is __import__('builtins')"); got != "('__main__', True)" {
		t.Errorf("__name__, __builtins__ = %s", got)
	}
	pyOK(k, "import math\nx = 41\ndef inc(n):\n    return n + 1\nclass Point:\n    pass")
	if got := pyValue(k, "inc(x), round(math.pi, 2)"); got != "(42, 3.14)" {
		t.Errorf("state across cells = %s, want (42, 3.14)", got)
	}
	// pickle finds classes defined in cells through __main__
	if got := pyValue(k, "import pickle, __main__\ntype(pickle.loads(pickle.dumps(Point()))).__name__, __main__.x"); got != "('Point', 41)" {
		t.Errorf("pickling a cell's class = %s", got)
	}
	// future statements stay in force, as at the Python prompt
	pyOK(k, "from __future__ import annotations")
	if got := pyValue(k, "def g(a: Undefined): pass\ng.__annotations__"); got != "{'a': 'Undefined'}" {
		t.Errorf("annotations after the future import = %s", got)
	}
	// names the kernel uses itself can be clobbered without harm
	pyOK(k, "json = os = sys = signal = io = types = builtins = None\n_send = _execute = _ns = _cell = None")
	pyOK(k, "del __builtins__")
	if got := pyValue(k, "1+1"); got != "2" {
		t.Errorf("after clobbering names: 1+1 = %q", got)
	}
	if got := pyValue(k, "print(inc(1))\nlen"); got != "<built-in function len>" {
		t.Errorf("builtins after del __builtins__ = %q", got)
	}
}

func TestPythonExecuteResult(t *testing.T) {
	k := startPython(t)
	for _, tc := range []struct {
		code string
		want []string // text/plain of the execute_results
		out  string
	}{
		{"1+1", []string{"2"}, ""},
		{"'a' * 3", []string{"'aaa'"}, ""},
		{"y = 1", nil, ""},
		{"1+1;", nil, ""},
		{"1+1; # quiet", nil, ""},
		{"1+1  # loud; still shown", []string{"2"}, ""},
		{"None", nil, ""},
		{"print('hi')", nil, "hi\n"},
		{"y = 5\ny * 2", []string{"10"}, ""},
		{"(y +\n 1)", []string{"6"}, ""},
		{"if y:\n    y", nil, ""},
	} {
		r := pyOK(k, tc.code)
		var got []string
		for _, d := range r.Results {
			got = append(got, text(t, d))
		}
		if !slices.Equal(got, tc.want) || r.Stdout != tc.out {
			t.Errorf("cell %q: results %q stdout %q, want %q and %q", tc.code, got, r.Stdout, tc.want, tc.out)
		}
	}
	pyValue(k, "6 * 7")
	if got := pyValue(k, "_ + 1"); got != "43" {
		t.Errorf("_ + 1 = %s, want 43 (_ is the last result)", got)
	}
	if got := pyValue(k, "__"); got != "42" {
		t.Errorf("__ = %s, want 42", got)
	}
}

func TestPythonDisplay(t *testing.T) {
	k := startPython(t)
	r := pyOK(k, "display(1, 'two')\ndisplay(None)")
	var got []string
	for _, d := range r.Displays {
		got = append(got, text(t, d))
	}
	if want := []string{"1", "'two'", "None"}; !slices.Equal(got, want) || len(r.Results) != 0 {
		t.Errorf("display(1, 'two'), display(None): %q (%d results), want %q", got, len(r.Results), want)
	}

	r = pyOK(k, `class Rich:
    def _repr_html_(self): return "<b>rich</b>"
    def _repr_markdown_(self): return None
    def _repr_png_(self): return b"\x89PNG-ish"
    def _repr_json_(self): return {"a": [1, 2]}
    def __repr__(self): return "Rich()"
Rich()`)
	if len(r.Results) != 1 {
		t.Fatalf("Rich(): %d results, want 1", len(r.Results))
	}
	d := r.Results[0]
	if got := text(t, d); got != "Rich()" {
		t.Errorf("text/plain = %q, want Rich()", got)
	}
	var html, pngB64 string
	mustUnmarshal(t, d.Data["text/html"], &html)
	mustUnmarshal(t, d.Data["image/png"], &pngB64)
	if html != "<b>rich</b>" {
		t.Errorf("text/html = %q", html)
	}
	if b, err := base64.StdEncoding.DecodeString(pngB64); err != nil || string(b) != "\x89PNG-ish" {
		t.Errorf("image/png = %q (%v), want base64 of the bytes", pngB64, err)
	}
	if got := string(d.Data["application/json"]); got != `{"a":[1,2]}` {
		t.Errorf("application/json = %s, want the object embedded", got)
	}
	if _, ok := d.Data["text/markdown"]; ok {
		t.Error("_repr_markdown_ returned None, yet text/markdown was sent")
	}

	// a class is not displayed through its unbound _repr_html_
	r = pyOK(k, "Rich")
	if _, ok := r.Results[0].Data["text/html"]; ok || text(t, r.Results[0]) != "<class '__main__.Rich'>" {
		t.Errorf("the class Rich displayed as %v", r.Results[0].Data)
	}

	r = pyOK(k, `class Bundle:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/html": "<i>b</i>", "text/markdown": "*b*"}, {"text/html": {"isolated": True}}
display(Bundle(), exclude=["text/markdown"])
display(Bundle(), include=["text/markdown"])
display({"text/plain": "raw", "text/csv": "a,b"}, raw=True)`)
	if len(r.Displays) != 3 {
		t.Fatalf("%d displays, want 3", len(r.Displays))
	}
	for i, want := range [][]string{{"text/html", "text/plain"}, {"text/markdown", "text/plain"}, {"text/csv", "text/plain"}} {
		var keys []string
		for k := range r.Displays[i].Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !slices.Equal(keys, want) {
			t.Errorf("display %d has %q, want %q", i, keys, want)
		}
	}
	if got := string(r.Displays[0].Metadata["text/html"]); got != `{"isolated":true}` {
		t.Errorf("metadata = %s", got)
	}

	// a failing rich repr is skipped; the text still shows
	r = pyOK(k, "class Broken:\n    def _repr_html_(self): raise ValueError('nope')\n    def __repr__(self): return 'Broken()'\nBroken()")
	if _, ok := r.Results[0].Data["text/html"]; ok || text(t, r.Results[0]) != "Broken()" || !strings.Contains(r.Stderr, "nope") {
		t.Errorf("a raising _repr_html_: data %v, stderr %q", r.Results[0].Data, r.Stderr)
	}
}

func TestPythonMatplotlib(t *testing.T) {
	k := startPython(t)
	pySkipWithout(t, k, "matplotlib")
	r := pyOK(k, `import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("squares")
plt.show()
print("after show")`)
	if len(r.Displays) != 1 || r.Stdout != "after show\n" {
		t.Fatalf("plot with plt.show(): %d displays, stdout %q; want 1 and the print", len(r.Displays), r.Stdout)
	}
	if strings.Contains(r.Stderr, "Warning") {
		t.Errorf("plt.show() warned: %s", r.Stderr)
	}
	pyCheckFigure(t, r.Displays[0])

	r = pyOK(k, "plt.figure()\nplt.plot([1, 2])\nplt.figure()\nplt.bar([1, 2], [3, 4])\n'two figures'")
	if len(r.Results) != 1 || len(r.Displays) != 3 {
		t.Fatalf("two figures without show: %d displays, %d results; want 2 figures and the result", len(r.Displays), len(r.Results))
	}
	pyCheckFigure(t, r.Displays[1])
	pyCheckFigure(t, r.Displays[2])
	if got := pyValue(k, "plt.get_fignums()"); got != "[]" {
		t.Errorf("figures open after the cell: %s, want none", got)
	}

	// a figure as the cell's value shows once, not again at the end
	r = pyOK(k, "fig, ax = plt.subplots()\nax.plot([3, 1, 2])\nfig")
	if len(r.Displays) != 1 || len(r.Results) != 1 {
		t.Fatalf("fig as the value: %d displays, %d results; want one", len(r.Displays), len(r.Results))
	}
	pyCheckFigure(t, r.Results[0])
}

// pyCheckFigure checks that a display is a plot a user could look at.
func pyCheckFigure(t *testing.T, d kernelproto.Display) {
	t.Helper()
	var b64 string
	mustUnmarshal(t, d.Data["image/png"], &b64)
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("image/png is not base64: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("image/png does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 200 || b.Dy() < 150 {
		t.Errorf("figure is %dx%d pixels, want a full plot", b.Dx(), b.Dy())
	}
	if got := text(t, d); !regexp.MustCompile(`^<Figure size \d+x\d+ with 1 Axes>$`).MatchString(got) {
		t.Errorf("figure text/plain = %q", got)
	}
}

func TestPythonPandas(t *testing.T) {
	k := startPython(t)
	pySkipWithout(t, k, "pandas")
	r := pyOK(k, "import pandas as pd\npd.DataFrame({'name': ['ada', 'bob'], 'age': [36, 41]})")
	if len(r.Results) != 1 {
		t.Fatalf("%d results, want 1", len(r.Results))
	}
	var html string
	mustUnmarshal(t, r.Results[0].Data["text/html"], &html)
	if !strings.Contains(html, "<table") || !strings.Contains(html, "ada") {
		t.Errorf("text/html = %q, want a table", html)
	}
	if got := text(t, r.Results[0]); !strings.Contains(got, "name") || !strings.Contains(got, "bob") {
		t.Errorf("text/plain = %q", got)
	}
}

func TestPythonTopLevelAwait(t *testing.T) {
	k := startPython(t)
	if got := pyValue(k, "import asyncio\nawait asyncio.sleep(0.01)\n'slept'"); got != "'slept'" {
		t.Errorf("await cell = %s", got)
	}
	// tasks and loop-bound objects live on between cells. As in IPython,
	// the loop runs only in cells that await.
	pyOK(k, `await asyncio.sleep(0)
q = asyncio.Queue()
async def producer():
    await asyncio.sleep(0.05)
    await q.put("from a task")
task = asyncio.create_task(producer())
loop = asyncio.get_running_loop()`)
	if got := pyValue(k, "await q.get()"); got != "'from a task'" {
		t.Errorf("await q.get() = %s", got)
	}
	if got := pyValue(k, "await asyncio.sleep(0)\nasyncio.get_running_loop() is loop, task.done()"); got != "(True, True)" {
		t.Errorf("same loop, task done = %s", got)
	}
	// asyncio.run in a plain cell still works, and await after it
	if got := pyValue(k, "async def seven():\n    return 7\nasyncio.run(seven())"); got != "7" {
		t.Errorf("asyncio.run = %s", got)
	}
	if got := pyValue(k, "await seven()"); got != "7" {
		t.Errorf("await after asyncio.run = %s", got)
	}
	r := k.Exec("await asyncio.sleep(0)\nraise ValueError('in await')")
	if r.Error == nil || r.Error.Name != "ValueError" || r.Error.Line != 2 {
		t.Fatalf("error in an await cell: %+v", r.Error)
	}
	if tb := strings.Join(r.Error.Traceback, "\n"); strings.Contains(tb, "asyncio") || strings.Contains(tb, "<string>") {
		t.Errorf("traceback shows kernel or asyncio frames:\n%s", tb)
	}
}

func TestPythonStdin(t *testing.T) {
	k := startPython(t)
	r := k.ExecWith(kernelproto.Execute{
		Code:     "import sys\nname = input('name? ')\nline = sys.stdin.readline()\nrest = sys.stdin.read()\nprint(name.upper(), line.strip(), rest.split())",
		Stdin:    "ada\nsecond\nthird fourth\n",
		HasStdin: true,
	}, 10*time.Second)
	if r.Status != kernelproto.StatusOK || r.Stdout != "name? ADA second ['third', 'fourth']\n" {
		t.Errorf("with stdin: status %q stdout %q error %+v", r.Status, r.Stdout, r.Error)
	}
	r = k.ExecWith(kernelproto.Execute{Code: "input()", HasStdin: true}, 10*time.Second)
	if r.Error == nil || r.Error.Name != "EOFError" || strings.Contains(r.Error.Message, "kiln") {
		t.Errorf("input() on empty stdin: %+v, want Python's EOFError", r.Error)
	}
	for _, code := range []string{"input()", "sys.stdin.read()", "sys.stdin.buffer.read()", "for line in sys.stdin: pass", "sys.stdin.readlines()"} {
		t0 := time.Now()
		r := k.ExecWith(kernelproto.Execute{Code: code}, 5*time.Second)
		if r.Status != kernelproto.StatusError || r.Error == nil || r.Error.Name != "EOFError" || !strings.Contains(r.Error.Message, "no stdin") {
			t.Errorf("%s without stdin: status %q error %+v", code, r.Status, r.Error)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("%s without stdin took %v; it must fail at once", code, d)
		}
	}
}

func TestPythonErrors(t *testing.T) {
	k := startPython(t)
	cellLine := regexp.MustCompile(`File "<cell \d+>", line (\d+)`)
	noKernel := func(tb string) {
		t.Helper()
		for _, s := range []string{"<string>", "_execute", "_await", "kernel.py", "_on_sigint"} {
			if strings.Contains(tb, s) {
				t.Errorf("traceback shows the kernel (%q):\n%s", s, tb)
			}
		}
	}

	r := k.Exec("a = 1\nb = 0\na / b")
	if r.Status != kernelproto.StatusError || r.Error == nil {
		t.Fatalf("1/0: status %q error %+v", r.Status, r.Error)
	}
	tb := strings.Join(r.Error.Traceback, "\n")
	if r.Error.Name != "ZeroDivisionError" || r.Error.Message != "division by zero" || r.Error.Line != 3 {
		t.Errorf("error = %s: %s at line %d, want ZeroDivisionError: division by zero at line 3", r.Error.Name, r.Error.Message, r.Error.Line)
	}
	if m := cellLine.FindStringSubmatch(tb); m == nil || m[1] != "3" || !strings.Contains(tb, "a / b") {
		t.Errorf("traceback does not show cell line 3 and its source:\n%s", tb)
	}
	noKernel(tb)

	// frames of user functions, from this cell and earlier ones, stay
	pyOK(k, "def inner():\n    raise ValueError('deep')\ndef outer():\n    inner()")
	r = k.Exec("x = 1\nouter()")
	tb = strings.Join(r.Error.Traceback, "\n")
	if r.Error.Name != "ValueError" || r.Error.Message != "deep" || r.Error.Line != 2 {
		t.Errorf("error = %+v", r.Error)
	}
	var lines []string
	for _, m := range cellLine.FindAllStringSubmatch(tb, -1) {
		lines = append(lines, m[1])
	}
	if !slices.Equal(lines, []string{"2", "4", "2"}) || !strings.Contains(tb, "inner()") || !strings.Contains(tb, "raise ValueError('deep')") {
		t.Errorf("traceback cell lines %v, want 2, 4, 2:\n%s", lines, tb)
	}
	noKernel(tb)

	r = k.Exec("try:\n    1/0\nexcept Exception as e:\n    raise RuntimeError('wrapped') from e")
	tb = strings.Join(r.Error.Traceback, "\n")
	if r.Error.Name != "RuntimeError" || r.Error.Line != 4 || !strings.Contains(tb, "ZeroDivisionError") || !strings.Contains(tb, "direct cause") {
		t.Errorf("chained error %+v:\n%s", r.Error, tb)
	}
	noKernel(tb)

	// the repr of the value is user code too
	r = k.Exec("class Bad:\n    def __repr__(self):\n        raise RuntimeError('no repr')\nBad()")
	if r.Error == nil || r.Error.Name != "RuntimeError" || !strings.Contains(strings.Join(r.Error.Traceback, "\n"), "raise RuntimeError('no repr')") {
		t.Errorf("error in __repr__: %+v", r.Error)
	}
	noKernel(strings.Join(r.Error.Traceback, "\n"))

	r = k.Exec("never_set = 1\ny = = 2")
	if r.Status != kernelproto.StatusError || r.Error == nil {
		t.Fatalf("syntax error: status %q error %+v", r.Status, r.Error)
	}
	if r.Error.Name != "SyntaxError" || r.Error.Line != 2 || !strings.Contains(r.Error.Message, "line 2") || !strings.Contains(r.Error.Message, "column 5") {
		t.Errorf("syntax error = %+v, want SyntaxError at line 2, column 5", r.Error)
	}
	tb = strings.Join(r.Error.Traceback, "\n")
	if !strings.Contains(tb, "y = = 2") || !strings.Contains(tb, "<cell ") {
		t.Errorf("syntax error traceback:\n%s", tb)
	}
	noKernel(tb)
	if got := pyValue(k, "'never_set' in globals()"); got != "False" {
		t.Errorf("a cell with a syntax error ran")
	}
}

func TestPythonInterrupt(t *testing.T) {
	k := startPython(t)
	pyOK(k, "counter = 7\nimport time, asyncio")
	for _, code := range []string{
		"while True: pass",
		"time.sleep(100)",
		"await asyncio.sleep(100)",
		"sum(i for i in range(10**12))",
	} {
		go func() {
			time.Sleep(300 * time.Millisecond)
			k.Interrupt()
		}()
		t0 := time.Now()
		r := k.ExecWith(kernelproto.Execute{Code: code}, 10*time.Second)
		after := time.Since(t0) - 300*time.Millisecond
		t.Logf("%s: interrupted %v after SIGINT", code, after)
		if r.Status != kernelproto.StatusInterrupted {
			t.Errorf("%s: status %q, want interrupted", code, r.Status)
		}
		if r.Error == nil || r.Error.Name != "KeyboardInterrupt" {
			t.Errorf("%s: error %+v, want a KeyboardInterrupt", code, r.Error)
		} else if tb := strings.Join(r.Error.Traceback, "\n"); r.Error.Line != 1 || !strings.Contains(tb, "<cell ") || strings.Contains(tb, "<string>") {
			t.Errorf("%s: interrupted at line %d, want where the cell waited (line 1):\n%s", code, r.Error.Line, tb)
		}
		if after > 2*time.Second {
			t.Errorf("%s: Done came %v after SIGINT, want about a second at most", code, after)
		}
	}
	if got := pyValue(k, "counter"); got != "7" {
		t.Errorf("after interrupts counter = %s, want 7", got)
	}

	// an interrupt never cuts a message in two, however many are sent
	go func() {
		time.Sleep(300 * time.Millisecond)
		k.Interrupt()
	}()
	r := k.ExecWith(kernelproto.Execute{Code: "while True:\n    display({'text/plain': 'x' * 100_000}, raw=True)"}, 10*time.Second)
	if r.Status != kernelproto.StatusInterrupted || len(r.Displays) == 0 {
		t.Errorf("interrupting a stream of displays: status %q after %d displays", r.Status, len(r.Displays))
	}
	for _, d := range r.Displays {
		if len(text(t, d)) != 100_000 {
			t.Fatalf("a display was cut: %d bytes", len(text(t, d)))
		}
	}

	// SIGINT while idle is ignored
	k.Interrupt()
	time.Sleep(100 * time.Millisecond)
	k.Interrupt()
	time.Sleep(100 * time.Millisecond)
	if got := pyValue(k, "counter + 1"); got != "8" {
		t.Errorf("after an idle SIGINT: counter + 1 = %s", got)
	}

	// code that handles KeyboardInterrupt itself goes on. (The loop is not
	// the first statement of the try: CPython 3.11.2 misses the handler of
	// an interrupt raised at the jump back to the start of a try block.)
	go func() {
		time.Sleep(300 * time.Millisecond)
		k.Interrupt()
	}()
	r = k.ExecWith(kernelproto.Execute{Code: "try:\n    n = 0\n    while True: n += 1\nexcept KeyboardInterrupt:\n    print('caught')\n'after'"}, 10*time.Second)
	if r.Status != kernelproto.StatusOK || r.Stdout != "caught\n" || len(r.Results) != 1 {
		t.Errorf("caught interrupt: status %q stdout %q", r.Status, r.Stdout)
	}
}

func TestPythonComplete(t *testing.T) {
	k := startPython(t)
	pyOK(k, "import os\nitems = [1, 2]\nmy_value = 3")
	for _, tc := range []struct {
		code       string
		cursor     int // -1: end of code
		want       []string
		not        []string
		start, end int // -1: cursor
	}{
		{"os.pa", -1, []string{"path", "pardir", "pathsep"}, []string{"os.path"}, 3, -1},
		{"items.app", -1, []string{"append"}, []string{"__add__"}, 6, -1},
		{"items.__le", -1, []string{"__len__", "__le__"}, nil, 6, -1},
		{"pri", -1, []string{"print"}, nil, 0, -1},
		{"whi", -1, []string{"while"}, nil, 0, -1},
		{"x = my_", -1, []string{"my_value"}, nil, 4, -1},
		{"disp", -1, []string{"display"}, nil, 0, -1},
		{"print(os.path.jo", -1, []string{"join"}, nil, 14, -1},
		{"items.app + 1", 9, []string{"append"}, nil, 6, 9},
		{"é = 1; items.app", -1, []string{"append"}, nil, 13, -1},
		{"import json; json.lo", -1, []string{"load", "loads"}, nil, 18, -1}, // not run yet
		{"_sen", -1, nil, []string{"_send"}, 0, -1},
		{"_exe", -1, nil, []string{"_execute"}, 0, -1},
		{"nosuch.x", -1, nil, nil, 7, -1},
	} {
		cursor := tc.cursor
		if cursor < 0 {
			cursor = utf8.RuneCountInString(tc.code)
		}
		line := k.Request(kernelproto.Complete{Type: kernelproto.TComplete, Cell: "q", Code: tc.code, Cursor: cursor})
		var c kernelproto.Completion
		mustUnmarshal(t, line, &c)
		if c.Type != kernelproto.TCompletion {
			t.Fatalf("answer to complete: %s", line)
		}
		for _, w := range tc.want {
			if !slices.Contains(c.Matches, w) {
				t.Errorf("complete %q: %q lacks %q", tc.code, c.Matches, w)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(c.Matches, w) {
				t.Errorf("complete %q: %q has %q", tc.code, c.Matches, w)
			}
		}
		if tc.want == nil && len(c.Matches) != 0 {
			t.Errorf("complete %q: %q, want none", tc.code, c.Matches)
		}
		end := tc.end
		if end < 0 {
			end = cursor
		}
		if c.CursorStart != tc.start || c.CursorEnd != end {
			t.Errorf("complete %q: cursor %d..%d, want %d..%d", tc.code, c.CursorStart, c.CursorEnd, tc.start, end)
		}
	}
	if got := pyValue(k, "'json' in globals()"); got != "False" {
		t.Errorf("completion ran the code it completed")
	}
}

func TestPythonCheck(t *testing.T) {
	k := startPython(t)
	for _, tc := range []struct {
		code      string
		status    string
		line, col int
	}{
		{"1 + 1", "complete", 0, 0},
		{"", "complete", 0, 0},
		{"# just a comment", "complete", 0, 0},
		{"x = 1\ny = 2\n", "complete", 0, 0},
		{"await something()", "complete", 0, 0},
		{"def f():", "incomplete", 0, 0},
		{"x = (1,\n", "incomplete", 0, 0},
		{`s = """open`, "incomplete", 0, 0},
		{"for i in range(3):\n    print(i)", "incomplete", 0, 0},
		{"for i in range(3):\n    print(i)\n", "incomplete", 0, 0},
		{"for i in range(3):\n    print(i)\n\n", "complete", 0, 0},
		{"if True: x = 1\n\nprint(x)", "complete", 0, 0},
		{"x = = 1", "invalid", 1, 5},
		{"x = 1\ny = (]", "invalid", 2, 6},
		{"é = = 1", "invalid", 1, 5},
	} {
		line := k.Request(kernelproto.Check{Type: kernelproto.TCheck, Cell: "q", Code: tc.code})
		var c kernelproto.CheckResult
		mustUnmarshal(t, line, &c)
		if c.Type != kernelproto.TCheckResult || c.Status != tc.status || c.Line != tc.line || c.Column != tc.col {
			t.Errorf("check %q = %s, want %s at %d:%d", tc.code, line, tc.status, tc.line, tc.col)
		}
		if c.Status == "invalid" && c.Message == "" {
			t.Errorf("check %q: invalid without a message", tc.code)
		}
	}
	// checking runs nothing
	k.Request(kernelproto.Check{Type: kernelproto.TCheck, Cell: "q", Code: "checked = 1\nimport sys\nsys.exit(1)"})
	if got := pyValue(k, "'checked' in globals()"); got != "False" {
		t.Errorf("check ran the code")
	}
}

func TestPythonOutput(t *testing.T) {
	k := startPython(t)
	r := pyOK(k, "import sys\nsys.stdout.write('no newline')\nsys.stderr.write('to stderr');")
	if r.Stdout != "no newline" || r.Stderr != "to stderr" {
		t.Errorf("stdout %q stderr %q, want both without newline, flushed before Done", r.Stdout, r.Stderr)
	}
	t0 := time.Now()
	r = pyOK(k, "print('x' * 5_000_000)")
	if len(r.Stdout) != 5_000_001 || strings.Trim(r.Stdout, "x") != "\n" {
		t.Errorf("printing 5 MB: got %d bytes of stdout", len(r.Stdout))
	}
	t.Logf("5 MB print took %v", time.Since(t0))
	r = pyOK(k, "for i in range(3):\n    print(i, file=sys.stderr if i == 1 else sys.stdout)")
	if r.Stdout != "0\n2\n" || r.Stderr != "1\n" {
		t.Errorf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
}

func TestPythonRobust(t *testing.T) {
	k := startPython(t)
	for _, code := range []string{"import sys\nsys.exit(3)", "raise SystemExit", "exit()", "quit(0)"} {
		r := k.Exec(code)
		if r.Status != kernelproto.StatusError || r.Error == nil || r.Error.Name != "SystemExit" {
			t.Errorf("%q: status %q error %+v, want an error named SystemExit", code, r.Status, r.Error)
		}
	}
	if got := pyValue(k, "1+1"); got != "2" {
		t.Errorf("after sys.exit: 1+1 = %q", got)
	}

	// bad lines and unknown messages are ignored without an answer
	if _, err := k.Conn.Write([]byte("not json\n{\"type\":\"nope\",\"cell\":\"zz\"}\n[1,2]\n\n{\"type\":\"execute\"\n")); err != nil {
		t.Fatal(err)
	}
	if got := pyValue(k, "2+2"); got != "4" {
		t.Errorf("after bad input: 2+2 = %q", got)
	}

	// a display over MaxLine is sent as text only, and says so
	r := pyOK(k, "class Huge:\n    def _repr_png_(self): return b'\\0' * (40 << 20)\n    def __repr__(self): return 'Huge()'\nHuge()")
	if len(r.Results) != 1 {
		t.Fatalf("huge display: %d results", len(r.Results))
	}
	if _, ok := r.Results[0].Data["image/png"]; ok || !strings.HasPrefix(text(t, r.Results[0]), "Huge()") || !strings.Contains(text(t, r.Results[0]), "limit") {
		t.Errorf("huge display: keys %d, text %q", len(r.Results[0].Data), text(t, r.Results[0]))
	}

	// a fork that returns from the cell ends there; the kernel goes on
	r = pyOK(k, "import os\npid = os.fork()\nif pid == 0:\n    print('child')\nelse:\n    os.waitpid(pid, 0)\n    print('parent')")
	if r.Stdout != "child\nparent\n" {
		t.Errorf("fork: stdout %q", r.Stdout)
	}
	if got := pyValue(k, "3+3"); got != "6" {
		t.Errorf("after fork: 3+3 = %q", got)
	}

	// a display from a thread while no cell runs is dropped, not sent
	pyOK(k, "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.2), display('late'))).start()")
	time.Sleep(500 * time.Millisecond)
	if r := pyOK(k, "'next'"); len(r.Displays) != 1 {
		t.Errorf("the cell after an idle display got %d displays, want its result only", len(r.Displays))
	}

	// NaN in JSON data cannot go on the wire as JSON; the rest does
	r = pyOK(k, "display({'application/json': {'x': float('nan')}, 'text/plain': 'nan'}, raw=True)")
	if len(r.Displays) != 1 || text(t, r.Displays[0]) != "nan" {
		t.Errorf("NaN display: %+v", r.Displays)
	}
	var probe map[string]any
	if raw, ok := r.Displays[0].Data["application/json"]; ok && json.Unmarshal(raw, &probe) != nil {
		t.Errorf("application/json is not JSON: %s", raw)
	}
}

// TestPythonWarmupNumbering: a warm-up cell (the pool's) takes no number,
// so the user's first cell is <cell 1> in tracebacks.
func TestPythonWarmupNumbering(t *testing.T) {
	k := startPython(t)
	if r := k.ExecWith(kernelproto.Execute{Code: "pass", Warmup: true}, time.Minute); r.Status != "ok" {
		t.Fatalf("warm-up cell: %+v", r)
	}
	r := k.Exec("1/0")
	if r.Error == nil || !strings.Contains(strings.Join(r.Error.Traceback, "\n"), `File "<cell 1>", line 1`) {
		t.Errorf("first cell after a warm-up: error %+v, want a traceback in <cell 1>", r.Error)
	}
	r = k.Exec("x = 1\n1/0")
	if r.Error == nil || !strings.Contains(strings.Join(r.Error.Traceback, "\n"), `File "<cell 2>", line 2`) {
		t.Errorf("second cell: error %+v, want a traceback in <cell 2>", r.Error)
	}
}
