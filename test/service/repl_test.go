package service_test

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/client"
)

// TestRemoteREPLOnATerminal drives `kiln repl --server URL SESSION` on a
// pseudo-terminal against a real server, as a person on a laptop would: a
// block, Ctrl-C on an endless loop (the state survives), Ctrl-D. The
// session stays active after the REPL leaves.
func TestRemoteREPLOnATerminal(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 3*time.Minute)
	srv := start(t, dataDir(t))
	defer srv.stop()
	c := srv.client(srv.key)
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSession(ctx, s.ID)

	ptmx, tty := openPTY(t)
	defer ptmx.Close()
	cmd := exec.Command(kilnBin, "repl", "--server", srv.url, "--key", srv.key, s.ID)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME=")
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

	at := scr.waitFor(t, 0, "session "+s.ID)
	at = scr.waitFor(t, at, ">>> ")
	typ("def f(n):\r")
	at = scr.waitFor(t, at, "... ")
	typ("    return n * 3\r\r")
	at = scr.waitFor(t, at, ">>> ")
	typ("x = f(14)\r")
	at = scr.waitFor(t, at, ">>> ")
	typ("while True: pass\r")
	time.Sleep(2 * time.Second)
	typ("\x03")
	at = scr.waitFor(t, at, "KeyboardInterrupt")
	at = scr.waitFor(t, at, ">>> ")
	typ("print(x)\r")
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
	case <-time.After(20 * time.Second):
		t.Fatalf("kiln repl did not end on Ctrl-D; screen:\n%s", scr.String())
	}
	if got, err := c.Session(ctx, s.ID); err != nil || got.Status != "active" {
		t.Errorf("the session after the REPL left: %+v %v; want it active", got, err)
	}
}

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
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if i := strings.Index(s.String()[from:], want); i >= 0 {
			return from + i + len(want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the terminal never showed %q; it shows:\n%s", want, s.String()[from:])
	return 0
}
