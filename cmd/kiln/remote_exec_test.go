package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
)

// TestExecCommand: output streams to the right stream, display outputs
// print as text, the error and limit lines follow, and the exit status
// follows the cell's status.
func TestExecCommand(t *testing.T) {
	f := newFakeKiln(t)
	f.goldenCases(t, []cliCase{
		{"exec-ok", "", []string{"exec", "s1", "print('hi')"}},
		{"exec-display", "", []string{"exec", "s1", "plot()"}},
		{"exec-error", "", []string{"exec", "s1", "1/0"}},
		{"exec-timeout", "", []string{"exec", "s1", "sleep()"}},
		{"exec-code-from-stdin", "print('hi')", []string{"exec", "--lang", "python", "s1"}},
		{"exec-code-dash", "echo $HOME", []string{"exec", "-l", "bash", "s1", "-"}},
		{"exec-flag-like-code", "", []string{"exec", "s1", "--", "-1"}},
		{"exec-stdin", "some input\n", []string{"exec", "--stdin", "-", "s1", "input()"}},
		{"exec-refused", "", []string{"exec", "s1", "boom"}},
		{"exec-unknown-session", "", []string{"exec", "s9", "1"}},
		{"exec-json", "", []string{"exec", "--json", "s1", "1/0"}},
		{"exec-empty", "  \n", []string{"exec", "s1"}},
	})
}

func TestExecExitStatus(t *testing.T) {
	f := newFakeKiln(t)
	for _, tt := range []struct {
		code string
		want int
	}{{"print('hi')", 0}, {"1/0", 1}, {"sleep()", 124}, {"boom", 125}} {
		for _, asJSON := range []bool{false, true} {
			args := []string{"exec", "s1", tt.code}
			if asJSON {
				args = append(args, "--json")
			}
			if r := f.run(t, "", args...); r.code != tt.want {
				t.Errorf("kiln %q: exit %d; want %d", args, r.code, tt.want)
			}
		}
	}
}

// TestExecRequest checks what kiln exec sends: the SSE Accept header
// (checked by the fake: without it the answer is JSON, and the golden
// output of exec-ok would differ), the language, timeout and stdin.
func TestExecRequest(t *testing.T) {
	f := newFakeKiln(t)
	in := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(in, []byte("from a file\n"), 0o644)
	r := f.run(t, "", "exec", "--lang", "python", "--timeout", "2s", "--stdin", in, "s1", "input()")
	if r.code != 0 || r.stdout != "got from a file\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var req client.ExecRequest
	if err := json.Unmarshal(f.body("POST /v1/sessions/s1/executions"), &req); err != nil {
		t.Fatal(err)
	}
	if req.Code != "input()" || req.Language != "python" || req.TimeoutMS != 2000 || req.Stdin == nil || *req.Stdin != "from a file\n" {
		t.Errorf("request %+v (stdin %q)", req, deref(req.Stdin))
	}
	// Without --stdin the cell gets none: reading fails at once.
	r = f.run(t, "", "exec", "s1", "input()")
	if r.code != 1 || !strings.Contains(r.stderr, "EOFError: no stdin") {
		t.Errorf("exec without --stdin: exit %d, stderr %q", r.code, r.stderr)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestExecShowOutput(t *testing.T) {
	for _, tt := range []struct {
		data map[string]string
		want string
	}{
		{map[string]string{"text/plain": "42"}, "42\n"},
		{map[string]string{"text/plain": "two\nlines\n"}, "two\nlines\n"},
		{map[string]string{"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}, "[image/png 8 bytes]\n"},
		{map[string]string{"image/png": "iVBO\nRw0K\nGgo=\n"}, "[image/png 8 bytes]\n"},
		{map[string]string{"image/svg+xml": "<svg/>"}, "[image/svg+xml 6 bytes]\n"},
		{map[string]string{"text/html": "<b>", "application/json": "{}"}, "[application/json output]\n[text/html output]\n"},
	} {
		o := client.Output{Data: map[string]json.RawMessage{}}
		for k, v := range tt.data {
			b, _ := json.Marshal(v)
			o.Data[k] = b
		}
		var sb strings.Builder
		showOutput(&sb, o)
		if sb.String() != tt.want {
			t.Errorf("showOutput(%v) = %q; want %q", tt.data, sb.String(), tt.want)
		}
	}
}

// TestExecInterrupt: Ctrl-C (the context ending) during a cell
// interrupts the cell on the server and exits 130.
func TestExecInterrupt(t *testing.T) {
	f := newFakeKiln(t)
	isolate(t)
	t.Setenv("KILN_SERVER", f.srv.URL)
	t.Setenv("KILN_KEY", fakeKey)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"exec", "s1", "hang()"}, strings.NewReader(""), &stdout, &stderr) }()
	for deadline := time.Now().Add(10 * time.Second); len(f.sent()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cell was never sent")
		}
	}
	time.Sleep(50 * time.Millisecond) // let the started event arrive
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("kiln exec did not return after the interrupt")
	}
	if code := exitCode(err, &stderr); code != 130 {
		t.Errorf("exit %d; want 130", code)
	}
	want := []string{"POST /v1/sessions/s1/executions", "POST /v1/sessions/s1/interrupt"}
	if got := f.sent(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests %q; want %q", got, want)
	}
	if stderr.String() != "kiln: interrupted the cell\n" {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestExecSaveOutputs: --save-outputs writes each image output to a file
// of its own, says where, never replaces a file, and refuses a directory
// it cannot use before the cell runs.
func TestExecSaveOutputs(t *testing.T) {
	f := newFakeKiln(t)
	dir := filepath.Join(t.TempDir(), "plots")
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" // what the fake's plot() sends, decoded
	for i, args := range [][]string{
		{"exec", "--save-outputs", dir, "s1", "plot()"},
		{"exec", "--save-outputs", dir, "--json", "s1", "plot()"},
	} {
		r := f.run(t, "", args...)
		name := filepath.Join(dir, fmt.Sprintf("output-%d.png", i+1))
		if r.code != 0 || !strings.Contains(r.stdout+r.stderr, name) {
			t.Errorf("kiln %q: exit %d, stdout %q, stderr %q; want the saved file %s named", args, r.code, r.stdout, r.stderr, name)
		}
		if b, err := os.ReadFile(name); err != nil || string(b) != png {
			t.Errorf("kiln %q: %s holds %q (%v); want the image %q", args, name, b, err, png)
		}
	}
	if r := f.run(t, "", "exec", "--save-outputs", dir, "s1", "plot()"); !strings.Contains(r.stdout, "[image/png saved to "+filepath.Join(dir, "output-3.png")+"]\n42\n") {
		t.Errorf("the third run's stdout: %q", r.stdout)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	before := len(f.sent())
	if r := f.run(t, "", "exec", "--save-outputs", file, "s1", "plot()"); r.code != 125 || !strings.Contains(r.stderr, "--save-outputs "+file) {
		t.Errorf("--save-outputs to a file: exit %d, stderr %q; want 125 and the reason", r.code, r.stderr)
	}
	if len(f.sent()) != before {
		t.Errorf("the cell ran although its outputs could not be saved")
	}
}
