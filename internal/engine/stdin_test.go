package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// typist plays a user at a terminal: it watches the cell's stdout and types
// each input once the text before it has appeared.
type typist struct {
	mu   sync.Mutex
	out  strings.Builder
	seen chan struct{} // a token per stdout event
	pw   *io.PipeWriter
	pr   *io.PipeReader
}

func newTypist() *typist {
	pr, pw := io.Pipe()
	return &typist{seen: make(chan struct{}, 1), pr: pr, pw: pw}
}

func (ty *typist) events() Events {
	return Events{Stdout: func(p []byte) {
		ty.mu.Lock()
		ty.out.Write(p)
		ty.mu.Unlock()
		select {
		case ty.seen <- struct{}{}:
		default:
		}
	}}
}

func (ty *typist) stdout() string {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	return ty.out.String()
}

// waitFor waits until stdout contains s; false after 30 s.
func (ty *typist) waitFor(s string) bool {
	deadline := time.After(30 * time.Second)
	for !strings.Contains(ty.stdout(), s) {
		select {
		case <-ty.seen:
		case <-deadline:
			return false
		}
	}
	return true
}

// script types beside the cell: steps are pairs of the output to wait for
// and the input to type then; an input of "" closes stdin (end of file).
// The returned channel says which output never came, if any.
func (ty *typist) script(steps ...string) <-chan string {
	missing := make(chan string, 1)
	go func() {
		defer close(missing)
		for i := 0; i+1 < len(steps); i += 2 {
			if !ty.waitFor(steps[i]) {
				missing <- steps[i]
				return
			}
			if steps[i+1] == "" {
				ty.pw.Close()
			} else if _, err := io.WriteString(ty.pw, steps[i+1]); err != nil {
				missing <- "a reader for " + steps[i+1]
				return
			}
		}
	}()
	return missing
}

func (ty *typist) run(t *testing.T, s *Session, c Cell) kiln.CellResult {
	t.Helper()
	c.StdinStream = ty.pr
	res, err := s.Run(context.Background(), c, ty.events())
	if err != nil {
		t.Fatalf("%s cell %q: %v", c.Language, c.Code, err)
	}
	return res
}

func checkScript(t *testing.T, missing <-chan string) {
	t.Helper()
	if m, ok := <-missing; ok {
		t.Errorf("%q never appeared on stdout", m)
	}
}

// blocked is a reader whose Read never returns.
type blocked struct{}

func (blocked) Read([]byte) (int, error) { select {} }

func TestStreamingStdinPython(t *testing.T) {
	s := newSession(t, kiln.Limits{})
	ctx := context.Background()

	// input() waits for what is typed after its prompt shows.
	ty := newTypist()
	typed := ty.script("name? ", "ada\n")
	r := ty.run(t, s, Cell{Language: "python", Code: `name = input("name? "); print("hi", name)`})
	checkScript(t, typed)
	if r.Status != kiln.StatusOK || r.Stdout != "name? hi ada\n" {
		t.Errorf("input(): status %s stdout %q error %+v", r.Status, r.Stdout, r.Error)
	}

	// Two inputs in one cell, then the rest to the end of file.
	ty = newTypist()
	typed = ty.script("first? ", "one\n", "second? ", "two\nthree\n", "got two", "")
	r = ty.run(t, s, Cell{Language: "python", Code: "import sys\na = input('first? ')\nb = input('second? ')\nprint('got', b)\nprint([a, b, sys.stdin.read()])"})
	checkScript(t, typed)
	if want := "first? second? got two\n['one', 'two', 'three\\n']\n"; r.Status != kiln.StatusOK || r.Stdout != want {
		t.Errorf("two inputs: status %s stdout %q, want %q; error %+v", r.Status, r.Stdout, want, r.Error)
	}

	// End of file is EOFError.
	r, err := s.Run(ctx, Cell{Language: "python", Code: "input('x? ')", StdinStream: strings.NewReader("")}, Events{})
	if err != nil || r.Status != kiln.StatusError || r.Error == nil || r.Error.Name != "EOFError" {
		t.Errorf("end of file: %v, status %s error %+v", err, r.Status, r.Error)
	}

	// StdinStream wins over Stdin.
	fixed := "fixed\n"
	r, err = s.Run(ctx, Cell{Language: "python", Code: "input()", Stdin: &fixed, StdinStream: strings.NewReader("streamed\n")}, Events{})
	if err != nil || result(r) != "'streamed'" {
		t.Errorf("Stdin and StdinStream: %v, result %q", err, result(r))
	}

	// A cell that never reads ends as usual; so does one whose reader never
	// returns, even when it waits for input until its timeout.
	start := time.Now()
	r, err = s.Run(ctx, Cell{Language: "python", Code: "kept = 'yes'\n6 * 7", StdinStream: blocked{}}, Events{})
	if err != nil || result(r) != "42" || time.Since(start) > 10*time.Second {
		t.Errorf("a cell that does not read: %v, result %q after %v", err, result(r), time.Since(start))
	}
	start = time.Now()
	r, err = s.Run(ctx, Cell{Language: "python", Code: "input('never? ')", StdinStream: blocked{}, Timeout: time.Second}, Events{})
	if err != nil || r.Status != kiln.StatusTimeout || time.Since(start) > 10*time.Second {
		t.Errorf("waiting on a reader that never returns: %v, status %s after %v", err, r.Status, time.Since(start))
	}
	if r := runCell(t, s, "python", "kept"); result(r) != "'yes'" {
		t.Errorf("state after a timeout in input(): %+v", r)
	}

	// An interrupt while input() waits stops the cell and keeps the state.
	ty = newTypist()
	go func() {
		if ty.waitFor("waiting? ") {
			time.Sleep(100 * time.Millisecond)
			s.Interrupt()
		}
	}()
	r = ty.run(t, s, Cell{Language: "python", Code: "counter = 7\ninput('waiting? ')"})
	if r.Status != kiln.StatusInterrupted || r.Error == nil || r.Error.Name != "KeyboardInterrupt" {
		t.Errorf("interrupt in input(): status %s error %+v", r.Status, r.Error)
	}
	if r := runCell(t, s, "python", "counter"); result(r) != "7" {
		t.Errorf("state after an interrupt in input(): %+v", r)
	}

	// Input the cell has not read waits in the sandbox, up to 16 MiB; past
	// that the read fails and says why.
	big := strings.NewReader(strings.Repeat("x", 17<<20))
	r, err = s.Run(ctx, Cell{Language: "python", Code: "import sys, time\ntime.sleep(2)\nn = 0\nwhile True:\n    b = sys.stdin.buffer.read1(1 << 20)\n    if not b: break\n    n += len(b)", StdinStream: big}, Events{})
	if err != nil || r.Status != kiln.StatusError || r.Error == nil || r.Error.Name != "OSError" || !strings.Contains(r.Error.Message, "16 MiB") {
		t.Errorf("stdin over the bound: %v, status %s error %+v", err, r.Status, r.Error)
	}
	if r := runCell(t, s, "python", "n"); result(r) != "16777216" {
		t.Errorf("stdin over the bound: the cell read %s bytes before the error, want 16 MiB", result(r))
	}
}

func TestStreamingStdinPrograms(t *testing.T) {
	s := newSession(t, kiln.Limits{})

	// A C program reads line by line as the lines are typed.
	ty := newTypist()
	typed := ty.script("name? ", "ada\n", "got ada\n", "grace\n", "got grace\n", "")
	r := ty.run(t, s, Cell{Language: "c", Code: `#include <stdio.h>
int main(void) {
	char line[256];
	printf("name? ");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		printf("got %s", line);
		fflush(stdout);
	}
	printf("end\n");
	return 0;
}`, Timeout: 2 * time.Minute})
	checkScript(t, typed)
	if want := "name? got ada\ngot grace\nend\n"; r.Status != kiln.StatusOK || r.Stdout != want {
		t.Errorf("C line by line: status %s stdout %q, want %q; error %+v", r.Status, r.Stdout, want, r.Error)
	}

	// The build does not read it: a program that never reads ends, its
	// reader blocked or not.
	start := time.Now()
	r, err := s.Run(context.Background(), Cell{Language: "c", Code: "#include <stdio.h>\nint main(void) { puts(\"no input\"); return 0; }", StdinStream: blocked{}, Timeout: 2 * time.Minute}, Events{})
	if err != nil || r.Status != kiln.StatusOK || r.Stdout != "no input\n" || time.Since(start) > time.Minute {
		t.Errorf("a program that does not read: %v, %s %q after %v", err, r.Status, r.Stdout, time.Since(start))
	}

	// Past 16 MiB of unread input the program gets end of file and a note.
	big := strings.NewReader(strings.Repeat("x", 17<<20))
	r, err = s.Run(context.Background(), Cell{Language: "c", Code: `#include <stdio.h>
#include <unistd.h>
int main(void) {
	static char b[1 << 16];
	size_t n, total = 0;
	sleep(2);
	while ((n = fread(b, 1, sizeof b, stdin)) > 0)
		total += n;
	printf("%zu\n", total);
	return 0;
}`, StdinStream: big, Timeout: 2 * time.Minute}, Events{})
	var total int
	if err == nil {
		fmt.Sscan(r.Stdout, &total)
	}
	if err != nil || r.Status != kiln.StatusOK || total < 16<<20 || total >= 17<<20 || !strings.Contains(r.Stderr, "more than 16 MiB of stdin") {
		t.Errorf("stdin over the bound: %v, status %s, read %d bytes, stderr %q; want 16 MiB and a bit, and a note", err, r.Status, total, r.Stderr)
	}
}

func TestStreamingStdinShells(t *testing.T) {
	s := newSession(t, kiln.Limits{})

	ty := newTypist()
	typed := ty.script("name? ", "ada\n", "hi ada\n", "x\ny\n", "lines: 2\n", "")
	r := ty.run(t, s, Cell{Language: "bash", Code: `printf 'name? '; read -r name; echo "hi $name"; read -r a; read -r b; echo "lines: 2"; cat; echo done`})
	checkScript(t, typed)
	if want := "name? hi ada\nlines: 2\ndone\n"; r.Status != kiln.StatusOK || r.Stdout != want {
		t.Errorf("bash read: status %s stdout %q, want %q; error %+v", r.Status, r.Stdout, want, r.Error)
	}

	ty = newTypist()
	typed = ty.script("name? ", "ada\n")
	r = ty.run(t, s, Cell{Language: "javascript", Code: "const rl = require('readline').createInterface({input: process.stdin, output: process.stdout});\n" +
		"const name = await new Promise((resolve) => rl.question('name? ', resolve));\nrl.close();\nconsole.log('hi', name);"})
	checkScript(t, typed)
	if r.Status != kiln.StatusOK || r.Stdout != "name? hi ada\n" {
		t.Errorf("javascript rl.question: status %s stdout %q error %+v", r.Status, r.Stdout, r.Error)
	}
}
