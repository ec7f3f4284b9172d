package engine

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// answerer plays a UI: it types an answer each time the cell asks for
// input (Events.Input), and records the prompts it was shown.
type answerer struct {
	mu      sync.Mutex
	prompts []string
	answers []string // typed in turn; past the last, stdin is closed
	pw      *io.PipeWriter
	stdout  strings.Builder
	stderr  strings.Builder
}

func (a *answerer) run(t *testing.T, s *Session, language, code string) kiln.CellResult {
	t.Helper()
	pr, pw := io.Pipe()
	a.pw = pw
	ev := Events{
		Stdout: func(p []byte) { a.stdout.Write(p) },
		Stderr: func(p []byte) { a.stderr.Write(p) },
		Input: func(prompt string, password bool) {
			shown := prompt
			if password {
				shown = "(secret) " + prompt
			}
			a.mu.Lock()
			a.prompts = append(a.prompts, shown)
			n := len(a.prompts)
			a.mu.Unlock()
			// The prompt has been passed to Stdout or Stderr already.
			if !strings.HasSuffix(a.stdout.String(), prompt) && !strings.HasSuffix(a.stderr.String(), prompt) {
				t.Errorf("input request with prompt %q before the prompt was output (stdout %q)", prompt, a.stdout.String())
			}
			go func() {
				if n <= len(a.answers) {
					io.WriteString(pw, a.answers[n-1])
				} else {
					pw.Close()
				}
			}()
		},
	}
	res, err := s.Run(context.Background(), Cell{Language: language, Code: code, StdinStream: pr}, ev)
	if err != nil {
		t.Fatalf("%s cell %q: %v", language, code, err)
	}
	return res
}

func (a *answerer) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.prompts
}

// TestInputRequest: a cell that reads streamed stdin with nothing sent
// makes an input request with its prompt, once per wait, and goes on with
// the answer.
func TestInputRequest(t *testing.T) {
	s := newSession(t, kiln.Limits{})
	a := &answerer{answers: []string{"ada\n", "36\n"}}
	r := a.run(t, s, "python", "name = input('Name: ')\nage = input('Age: ')\nprint(name, age)")
	if r.Status != kiln.StatusOK || r.Stdout != "Name: Age: ada 36\n" {
		t.Errorf("python: status %s stdout %q error %+v", r.Status, r.Stdout, r.Error)
	}
	if got := strings.Join(a.got(), "|"); got != "Name: |Age: " {
		t.Errorf("python: prompts %q, want Name: and Age: ", got)
	}

	// A raw read of fd 0 asks too; end of file (no answer left) ends it.
	a = &answerer{answers: []string{"raw\n"}}
	r = a.run(t, s, "python", "import os, sys\nsys.stdout.write('Data> ')\nb = b''\nwhile c := os.read(0, 100):\n    b += c\nprint(b)")
	if r.Status != kiln.StatusOK || r.Stdout != "Data> b'raw\\n'\n" {
		t.Errorf("python os.read(0): status %s stdout %q error %+v", r.Status, r.Stdout, r.Error)
	}
	if got := strings.Join(a.got(), "|"); got != "Data> |" {
		t.Errorf("python os.read(0): prompts %q, want Data> then an empty one", got)
	}

	a = &answerer{answers: []string{"js\n"}}
	r = a.run(t, s, "javascript", "process.stdout.write('JS? ');\nconst text = require('fs').readFileSync(0, 'utf8');\nconsole.log(JSON.stringify(text))")
	if r.Status != kiln.StatusOK || r.Stdout != "JS? \"js\\n\"\n" {
		t.Errorf("javascript: status %s stdout %q error %+v", r.Status, r.Stdout, r.Error)
	}
	if got := a.got(); len(got) == 0 || got[0] != "JS? " {
		t.Errorf("javascript: prompts %q, want JS? first", got)
	}

	// getpass is a secret.
	a = &answerer{answers: []string{"ada\n", "hunter2\n"}}
	r = a.run(t, s, "python", "import getpass\nname = input('Name: ')\npw = getpass.getpass('PIN: ')\nprint(name, len(pw))")
	if r.Status != kiln.StatusOK || r.Stdout != "Name: ada 7\n" || r.Stderr != "PIN: " {
		t.Errorf("getpass: status %s stdout %q stderr %q error %+v", r.Status, r.Stdout, r.Stderr, r.Error)
	}
	if got := strings.Join(a.got(), "|"); got != "Name: |(secret) PIN: " {
		t.Errorf("getpass: prompts %q", got)
	}

	// bash asks ahead; its read builtin says when it waits, read -s as a
	// secret, and read -p shows its prompt.
	a = &answerer{answers: []string{"ada\n", "pw\n"}}
	r = a.run(t, s, "bash", "read -r -p 'Name: ' n\nread -s -p 'PIN: ' p\necho \"hi $n ${#p}\"")
	if r.Status != kiln.StatusOK || r.Stdout != "hi ada 2\n" || r.Stderr != "Name: PIN: " {
		t.Errorf("bash: status %s stdout %q stderr %q error %+v", r.Status, r.Stdout, r.Stderr, r.Error)
	}
	if got := strings.Join(a.got(), "|"); got != "Name: |(secret) PIN: " {
		t.Errorf("bash: prompts %q", got)
	}

	// A cell that does not read asks nothing.
	a = &answerer{}
	if r = a.run(t, s, "python", "1 + 1"); r.Status != kiln.StatusOK || len(a.got()) != 0 {
		t.Errorf("a cell that does not read: status %s, prompts %q", r.Status, a.got())
	}
}

// TestRawStdinFixed: os.read(0) and fs.readFileSync(0) see a cell's fixed
// stdin in the sandbox.
func TestRawStdinFixed(t *testing.T) {
	s := newSession(t, kiln.Limits{})
	in := "line one\nline two\n"
	for _, c := range []struct{ lang, code string }{
		{"python", "import os\nprint(os.read(0, 1000).decode(), end='')"},
		{"javascript", "process.stdout.write(require('fs').readFileSync(0, 'utf8'))"},
	} {
		r, err := s.Run(context.Background(), Cell{Language: c.lang, Code: c.code, Stdin: &in}, Events{})
		if err != nil || r.Status != kiln.StatusOK || r.Stdout != in {
			t.Errorf("%s: %v, status %s stdout %q error %+v", c.lang, err, r.Status, r.Stdout, r.Error)
		}
	}
}

// TestCellNumbers: a warm-up cell takes no number; tracebacks name the
// user's first cell <cell 1>, in Python and JavaScript.
func TestCellNumbers(t *testing.T) {
	s := newSession(t, kiln.Limits{})
	for _, c := range []struct{ lang, warm, code, want string }{
		{"python", "pass", "1/0", `File "<cell 1>", line 1`},
		{"javascript", "1", "null.x", "at <cell 1>:1:"},
	} {
		if _, err := s.Run(context.Background(), Cell{Language: c.lang, Code: c.warm, Warmup: true}, Events{}); err != nil {
			t.Fatal(err)
		}
		r := runCell(t, s, c.lang, c.code)
		if r.Error == nil || !strings.Contains(strings.Join(r.Error.Traceback, "\n"), c.want) {
			t.Errorf("%s: error %+v, want %q in the traceback", c.lang, r.Error, c.want)
		}
	}
}

// TestBashStderr: a bash cell's stderr is exactly what it wrote.
func TestBashStderr(t *testing.T) {
	s := newSession(t, kiln.Limits{})
	for _, code := range []string{"echo err >&2", "echo err >&2; exit 3", "set -e; echo err >&2; false", "echo err >&2"} {
		r := runCell(t, s, "bash", code)
		if r.Stderr != "err\n" {
			t.Errorf("%q: status %s stderr %q, want %q", code, r.Status, r.Stderr, "err\n")
		}
	}
}
