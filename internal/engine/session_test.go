package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
)

func newSession(t *testing.T, lim kiln.Limits) *Session {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
	b, err := native.New(native.Config{}, discard())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(b, discard()).NewSession(context.Background(), SessionSpec{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func runCell(t *testing.T, s *Session, language, code string) kiln.CellResult {
	t.Helper()
	res, err := s.Run(context.Background(), Cell{Language: language, Code: code}, Events{})
	if err != nil {
		t.Fatalf("%s cell %q: %v", language, code, err)
	}
	return res
}

func result(res kiln.CellResult) string {
	for _, o := range res.Outputs {
		if o.Result {
			return Text(o)
		}
	}
	return ""
}

func TestPythonSession(t *testing.T) {
	s := newSession(t, kiln.Limits{})
	ctx := context.Background()

	if r := runCell(t, s, "python", "import math\nx = 20\ndef f(n):\n    return n + x"); r.Status != kiln.StatusOK {
		t.Fatalf("first cell: %+v", r)
	}
	if r := runCell(t, s, "python", "f(22)"); result(r) != "42" {
		t.Errorf("state across cells: result %q, want 42 (%+v)", result(r), r)
	}

	// Interrupt keeps state.
	go func() {
		time.Sleep(500 * time.Millisecond)
		s.Interrupt()
	}()
	start := time.Now()
	r := runCell(t, s, "python", "while True:\n    x += 0")
	if r.Status != kiln.StatusInterrupted || time.Since(start) > 3*time.Second {
		t.Errorf("interrupt: status %s after %v", r.Status, time.Since(start))
	}
	if r := runCell(t, s, "python", "x"); result(r) != "20" {
		t.Errorf("state after interrupt: %q", result(r))
	}

	// Errors point into the cell.
	r = runCell(t, s, "python", "a = 1\nb = 0\na / b")
	if r.Status != kiln.StatusError || r.Error == nil || r.Error.Name != "ZeroDivisionError" || r.Error.Line != 3 {
		t.Errorf("error: %+v %+v", r.Status, r.Error)
	}

	// Rich output: a plot as a PNG that decodes; a DataFrame as an HTML table.
	r = runCell(t, s, "python", "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('kiln')")
	img := findMIME(r, "image/png")
	if img == nil {
		t.Fatalf("no image/png in %+v", r.Outputs)
	}
	var b64 string
	json.Unmarshal(img, &b64)
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(raw)); err != nil || cfg.Width < 100 {
		t.Errorf("the plot does not decode as a PNG image: %v %+v", err, cfg)
	}
	r = runCell(t, s, "python", "import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3, 19]})")
	var html string
	json.Unmarshal(findMIME(r, "text/html"), &html)
	if !strings.Contains(html, "<table") || !strings.Contains(html, "<td>Lima</td>") {
		t.Errorf("DataFrame: html %.300q", html)
	}

	// Artifacts and stdin.
	r = runCell(t, s, "python", "open('result.csv', 'w').write('a,b\\n1,2\\n')")
	if len(r.Artifacts) != 1 || r.Artifacts[0].Path != "result.csv" || r.Artifacts[0].Change != "created" {
		t.Errorf("artifacts: %+v", r.Artifacts)
	}
	in := "kiln\n"
	r, err = s.Run(ctx, Cell{Language: "python", Code: "print('hello', input())", Stdin: &in}, Events{})
	if err != nil || r.Stdout != "hello kiln\n" {
		t.Errorf("stdin: %q, %v", r.Stdout, err)
	}

	// Restart clears state but keeps files.
	if err := s.Restart(ctx, "python"); err != nil {
		t.Fatal(err)
	}
	r = runCell(t, s, "python", "'x' in globals(), open('result.csv').read()")
	if got := result(r); got != "(False, 'a,b\\n1,2\\n')" {
		t.Errorf("after restart: %q", got)
	}

	// Completion and check.
	c, err := s.Complete(ctx, "python", "import os\nos.pa", len("import os\nos.pa"))
	if err != nil || !contains(c.Matches, "os.path") && !contains(c.Matches, "path") {
		t.Errorf("complete: %+v, %v", c, err)
	}
	chk, err := s.Check(ctx, "python", "def f(:\n  pass\n")
	if err != nil || chk.Status != "invalid" || chk.Line != 1 {
		t.Errorf("check: %+v, %v", chk, err)
	}
}

func TestSessionLimits(t *testing.T) {
	s := newSession(t, kiln.Limits{MemoryBytes: 128 * kiln.MiB, OutputBytes: 64 * kiln.KiB})
	runCell(t, s, "python", "kept = 1")
	r, err := s.Run(context.Background(), Cell{Language: "python", Code: "while True: pass", Timeout: 500 * time.Millisecond}, Events{})
	if err != nil || r.Status != kiln.StatusTimeout {
		t.Errorf("timeout: %+v %v", r.Status, err)
	}
	if r := runCell(t, s, "python", "kept"); result(r) != "1" {
		t.Errorf("a timeout that the kernel honoured lost state: %+v", r)
	}
	if r := runCell(t, s, "python", "print('x' * 200000)"); r.Status != kiln.StatusOutput || len(r.Stdout) > 64*kiln.KiB {
		t.Errorf("output flood: %s with %d bytes", r.Status, len(r.Stdout))
	}
	r = runCell(t, s, "python", "b = bytearray(300 << 20)")
	if r.Status != kiln.StatusMemory || r.Notice == "" {
		t.Errorf("memory bomb: %s %q", r.Status, r.Notice)
	}
	if r := runCell(t, s, "python", "1+1"); result(r) != "2" {
		t.Errorf("after the memory bomb: %+v", r)
	}
	if _, err := s.Run(context.Background(), Cell{Language: "cobol", Code: "x"}, Events{}); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("unknown language: %v", err)
	}
	s.Close(context.Background())
	if _, err := s.Run(context.Background(), Cell{Language: "python", Code: "1"}, Events{}); err == nil {
		t.Error("a closed session ran a cell")
	}
}

func findMIME(r kiln.CellResult, mime string) json.RawMessage {
	for _, o := range r.Outputs {
		if v, ok := o.Data[mime]; ok {
			return v
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestProgramCellsSpareKernels: a program cell that times out in a session
// is killed without touching the session's Python kernel.
func TestProgramCellsSpareKernels(t *testing.T) {
	s := newSession(t, kiln.Limits{})
	runCell(t, s, "python", "state = 'kept'")
	r, err := s.Run(context.Background(), Cell{Language: "c", Code: "int main(void) { for (;;) {} }", Timeout: time.Second}, Events{})
	if err != nil || r.Status != kiln.StatusTimeout {
		t.Fatalf("C busy loop: %+v %v", r.Status, err)
	}
	if r := runCell(t, s, "python", "state"); result(r) != "'kept'" {
		t.Errorf("the Python kernel lost its state when a C cell timed out: %+v", r)
	}
	r = runCell(t, s, "c", "#include <stdio.h>\nint main(void) { int x; if (scanf(\"%d\", &x) == 1) printf(\"%d\\n\", x * 2); return 3; }")
	if r.Status != kiln.StatusError || r.ExitCode == nil || *r.ExitCode != 3 {
		t.Errorf("C exit status: %+v", r)
	}
	r = runCell(t, s, "c", "int main(void) { return y; }")
	if r.Error == nil || r.Error.Name != "CompileError" || len(r.Error.Diagnostics) == 0 || r.Error.Diagnostics[0].Line != 1 {
		t.Errorf("C compile error: %+v", r.Error)
	}
}
