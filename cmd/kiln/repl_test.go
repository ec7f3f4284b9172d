package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns a new pseudo-terminal's controller and its terminal.
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptmx, tty
}

// screen collects what the REPL writes to its terminal.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the screen, after position from, contains want.
func (s *screen) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if i := strings.Index(s.String()[from:], want); i >= 0 {
			return from + i + len(want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the terminal never showed %q; it shows:\n%s", want, s.String()[from:])
	return 0
}

// TestREPLOnATerminal drives `kiln repl python` on a real pseudo-terminal,
// as a person would: a multi-line block, Ctrl-C on an endless loop (the
// state survives), Ctrl-C on a half-typed line, history, and Ctrl-D.
func TestREPLOnATerminal(t *testing.T) {
	needRoot(t)
	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	cmd := exec.Command(kilnBin, "repl", "python")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	defer cmd.Process.Kill()
	var scr screen
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			scr.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	typ := func(s string) { ptmx.Write([]byte(s)) }

	at := scr.waitFor(t, 0, ">>> ")
	typ("def f(n):\r")
	at = scr.waitFor(t, at, "... ")
	typ("    return n * 3\r\r")
	at = scr.waitFor(t, at, ">>> ")
	typ("x = f(14)\r")
	at = scr.waitFor(t, at, ">>> ")
	typ("while True: pass\r\r")
	time.Sleep(time.Second)
	typ("\x03")
	at = scr.waitFor(t, at, "KeyboardInterrupt")
	at = scr.waitFor(t, at, ">>> ")
	typ("print(x)\r")
	at = scr.waitFor(t, at, "42")
	at = scr.waitFor(t, at, ">>> ")
	typ("half typed\x03")
	at = scr.waitFor(t, at, ">>> ")
	typ("\x1b[A\r") // up: the last line run, print(x)
	at = scr.waitFor(t, at, "42")
	scr.waitFor(t, at, ">>> ")
	typ("\x04")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("kiln repl ended with %v after Ctrl-D; screen:\n%s", err, scr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("kiln repl did not end on Ctrl-D; screen:\n%s", scr.String())
	}
}

// TestReplLeavesNoTempDir: a REPL session that shows no image leaves
// nothing in the temporary directory; one that does keeps the image in a
// directory it names.
func TestReplLeavesNoTempDir(t *testing.T) {
	needRoot(t)
	tmp := t.TempDir()
	r := execKiln(t, invocation{stdin: []byte("1 + 1\n"), env: []string{"TMPDIR=" + tmp}}, "repl", "python")
	if r.code != 0 || !strings.Contains(r.stdout, "2") {
		t.Fatalf("kiln repl python: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("kiln repl left %d entries in $TMPDIR, e.g. %s", len(ents), ents[0].Name())
	}
}

// TestRemoteRepl: kiln repl --server runs cells of a server's session,
// their output on kiln's streams, and moves files with :get and :put.
func TestRemoteRepl(t *testing.T) {
	f := newFakeKiln(t)
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("TMPDIR", t.TempDir()) // where the plot's image goes
	os.WriteFile("local.txt", []byte("from here\n"), 0o644)
	in := "print('hi')\n:files\n:get notes.txt\n:put local.txt up.txt\nplot()\n"
	r := f.run(t, in, "repl", "--server", f.srv.URL, "s1")
	if r.code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"hi\n", "notes.txt", "copied notes.txt to notes.txt", "drawing\n", "[image/png saved to "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf(":get notes.txt wrote %q (%v)", b, err)
	}
	if got := f.files["up.txt"]; string(got) != "from here\n" {
		t.Errorf(":put local.txt up.txt sent %q", got)
	}
	var cells []string
	for _, s := range f.sent() {
		if s == "POST /v1/sessions/s1/executions" {
			cells = append(cells, s)
		}
	}
	if len(cells) != 2 {
		t.Errorf("%d cells sent, want 2 (print, plot): %q", len(cells), f.sent())
	}
}

// TestRemoteReplRefusals: what does not go with a remote session is
// refused with a usage error that says why.
func TestRemoteReplRefusals(t *testing.T) {
	f := newFakeKiln(t)
	for _, tt := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"repl", "--server", f.srv.URL}, "give one session id", 2},
		{[]string{"repl", "--server", f.srv.URL, "--memory", "1G", "s1"}, "--memory does not go with --server", 2},
		{[]string{"repl", "--lang", "python", "python"}, "--lang goes with --server", 2},
		{[]string{"repl", "--server", f.srv.URL, "s9"}, "no session s9", 125},
	} {
		r := f.run(t, "", tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("kiln %q: exit %d, stderr %q; want exit %d and %q", tt.args, r.code, r.stderr, tt.code, tt.want)
		}
	}
}

// TestRemoteComplete: the remote REPL's guess of a whole cell asks for
// more lines after a block opens or a bracket stays open.
func TestRemoteComplete(t *testing.T) {
	s := &remoteSession{}
	for code, want := range map[string]bool{
		"x = 1":                          true,
		"def f(x):":                      false,
		"def f(x):\n    return x":        false, // until the empty line, which ready sees
		"print(1,":                       false,
		"d = {'a': [1,\n 2]}":            true,
		"for i in 1 2; do":               false,
		"for i in 1 2\ndo":               false,
		"if true; then":                  false,
		"for i in 1 2; do echo $i; done": true,
		"echo done":                      true,
	} {
		if got := s.Complete(t.Context(), "", code); got != want {
			t.Errorf("Complete(%q) = %v, want %v", code, got, want)
		}
	}
}
