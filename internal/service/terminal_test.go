package service

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// TestTerminal: a shell on a pty in the session's sandbox answers what
// is typed, on a /dev/pts terminal; a resize shows in stty size; closing
// it leaves none of its processes (a background job included), and the
// open and the close are audited. On the native backend (root) and on
// the unboxed one.
func TestTerminal(t *testing.T) {
	t.Run("native", func(t *testing.T) { testTerminal(t, newNativeService(t, Config{}), true) })
	t.Run("unboxed", func(t *testing.T) { testTerminal(t, newTestService(t, Config{}), false) })
}

func testTerminal(t *testing.T, ts *testService, sandboxed bool) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs /bin/bash")
	}
	ctx := ctxT(t, 2*time.Minute)
	owner := ts.user(t, "owner", false)
	sess, err := ts.CreateSession(ctx, owner, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	term, err := ts.OpenTerminal(ctx, owner, sess.ID, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(out, term); ended <- err }()
	await := func(what string, re *regexp.Regexp) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if m := re.FindString(out.String()); m != "" {
				return m
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no %s in the terminal's output:\n%q", what, out.String())
		return ""
	}
	term.Write([]byte("echo hi; tty\n"))
	await("hi line", regexp.MustCompile(`[\r\n]hi\r\n`))
	await("/dev/pts path from tty", regexp.MustCompile(`[\r\n]/dev/pts/[0-9]+\r\n`))

	if err := term.Resize(40, 100); err != nil {
		t.Fatal(err)
	}
	term.Write([]byte("stty size\n"))
	await("stty size of 40 100", regexp.MustCompile(`[\r\n]40 100\r\n`))

	// A background job, which must go with the terminal.
	term.Write([]byte("sleep 9876 & echo bg=$!\n"))
	await("background job", regexp.MustCompile(`[\r\n]bg=[0-9]+\r\n`))
	for i := 0; !sleeperAlive(); i++ { // $! is known before the child has exec'd sleep
		if i == 600 {
			t.Fatal("the background sleep 9876 is not running after 30s, so the check below would prove nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sandboxed {
		// The shell's jobs are in the sandbox's user cgroup, under its limits.
		// (v1 lists a line per hierarchy, v2 one line.)
		if cg := sleeperCgroup(); !regexp.MustCompile(`(?m):/kiln/[^/\n]+/user$`).MatchString(cg) {
			t.Errorf("the terminal's job is in cgroup %q, want the sandbox's kiln/<id>/user", cg)
		}
	}
	term.Close()
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the terminal's output ended with %v, want EOF", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal did not end within 30s of Close")
	}
	if sleeperAlive() {
		t.Error("sleep 9876 from the closed terminal is still running")
	}
	entries, _, err := ts.store.ListAudit(ctx, store.AuditFilter{SessionID: sess.ID}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		if strings.HasPrefix(e.Action, "terminal.") {
			actions = append(actions, e.Action+":"+e.Outcome)
		}
	}
	if got := strings.Join(actions, " "); !strings.Contains(got, "terminal.open:ok") || !strings.Contains(got, "terminal.close:ok") {
		t.Errorf("audit has %q, want terminal.open and terminal.close", got)
	}
}

// sleeperCgroup is /proc/PID/cgroup of the "sleep 9876" process.
func sleeperCgroup() string {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		if b, _ := os.ReadFile(p); string(b) == "sleep\x009876\x00" {
			cg, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cgroup"))
			return string(cg)
		}
	}
	return ""
}

// sleeperAlive says whether a "sleep 9876" runs anywhere on the host.
func sleeperAlive() bool {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		if bytes.Equal(b, []byte("sleep\x009876\x00")) {
			return true
		}
	}
	return false
}

// TestTerminalRoles: a collaborator may open a terminal; a viewer is
// refused (a shell runs commands), a stranger does not see the session,
// and a bad size is refused saying what is allowed.
func TestTerminalRoles(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, time.Minute)
	owner := ts.user(t, "owner", false)
	viewer := ts.user(t, "viewer", false)
	collab := ts.user(t, "collab", false)
	stranger := ts.user(t, "stranger", false)
	sess, err := ts.CreateSession(ctx, owner, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range []struct {
		u    kiln.User
		role kiln.Role
	}{{viewer, kiln.RoleViewer}, {collab, kiln.RoleCollaborator}} {
		if _, _, err := ts.ShareSession(ctx, owner, sess.ID, sh.u.ID, sh.role); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.OpenTerminal(ctx, viewer, sess.ID, 24, 80); kiln.KindOf(err) != kiln.Forbidden {
		t.Errorf("viewer: %v, want forbidden", err)
	}
	if _, err := ts.OpenTerminal(ctx, stranger, sess.ID, 24, 80); kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("stranger: %v, want not_found", err)
	}
	if _, err := ts.OpenTerminal(ctx, owner, sess.ID, 0, 80); kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), "between 1 and") {
		t.Errorf("0 rows: %v, want invalid naming the range", err)
	}
	term, err := ts.OpenTerminal(ctx, collab, sess.ID, 24, 80)
	if err != nil {
		t.Fatalf("collaborator: %v", err)
	}
	term.Close()
	if _, err := io.Copy(io.Discard, term); err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("closing: %v", err)
	}
}

// TestTerminalBounds: a session has at most protocol.MaxTerminals
// terminals (the next is a conflict that says so, and closing one makes
// room), and a terminal whose output nobody reads stops its shell, not
// the session: a cell runs meanwhile on the same agent connection.
func TestTerminalBounds(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, 2*time.Minute)
	owner := ts.user(t, "owner", false)
	sess, err := ts.CreateSession(ctx, owner, SessionSpec{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	var terms []*Terminal
	for range 4 {
		term, err := ts.OpenTerminal(ctx, owner, sess.ID, 24, 80)
		if err != nil {
			t.Fatal(err)
		}
		terms = append(terms, term)
	}
	if _, err := ts.OpenTerminal(ctx, owner, sess.ID, 24, 80); kiln.KindOf(err) != kiln.Conflict || !strings.Contains(err.Error(), "4 terminals") {
		t.Fatalf("a fifth terminal: %v, want a conflict naming the bound of 4", err)
	}
	// A flood nobody reads.
	terms[0].Write([]byte("seq 1 1000000000\n"))
	time.Sleep(time.Second)
	done := make(chan error, 1)
	go func() {
		e, err := ts.Exec(ctx, owner, sess.ID, kiln.CellRequest{Language: "python", Code: "print(6*7)"}, ExecEvents{})
		if err == nil && !strings.Contains(e.Result.Stdout, "42") {
			err = errors.New("stdout " + e.Result.Stdout)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a cell beside an unread terminal: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a cell did not finish while a terminal's output went unread: the terminal blocked the agent connection")
	}
	for _, term := range terms {
		term.Close()
		io.Copy(io.Discard, term)
	}
	term, err := ts.OpenTerminal(ctx, owner, sess.ID, 24, 80)
	if err != nil {
		t.Fatalf("a terminal after the others closed: %v", err)
	}
	term.Close()
	io.Copy(io.Discard, term)
}

// TestTerminalEndsWithSession: deleting the session ends its open
// terminal: the reader gets an error instead of waiting forever, and the
// shell's processes are gone with the sandbox.
func TestTerminalEndsWithSession(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, time.Minute)
	owner := ts.user(t, "owner", false)
	sess, err := ts.CreateSession(ctx, owner, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	term, err := ts.OpenTerminal(ctx, owner, sess.ID, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, term); ended <- err }()
	term.Write([]byte("sleep 9877 &\n"))
	for i := 0; !procAlive("sleep\x009877\x00"); i++ {
		if i == 600 {
			t.Fatal("sleep 9877 did not start in the terminal within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := ts.DeleteSession(ctx, owner, sess.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal's reader still waits 30s after its session was deleted")
	}
	for range 100 {
		if !procAlive("sleep\x009877\x00") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Error("sleep 9877 from the deleted session's terminal is still running")
}

func procAlive(cmdline string) bool {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		if b, _ := os.ReadFile(p); string(b) == cmdline {
			return true
		}
	}
	return false
}

// TestTerminalEndsDespiteEscapee: a process that leaves the shell's
// session (setsid) while holding the terminal open does not keep the
// terminal from ending when its shell exits.
func TestTerminalEndsDespiteEscapee(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("needs setsid (util-linux)")
	}
	ts := newTestService(t, Config{})
	ctx := ctxT(t, time.Minute)
	owner := ts.user(t, "owner", false)
	sess, err := ts.CreateSession(ctx, owner, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	term, err := ts.OpenTerminal(ctx, owner, sess.ID, 24, 80)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, term); ended <- err }()
	term.Write([]byte("setsid -f sleep 9878\n"))
	for i := 0; !procAlive("sleep\x009878\x00"); i++ {
		if i == 600 {
			t.Fatal("setsid -f sleep 9878 did not start within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	term.Write([]byte("exit\n"))
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the terminal ended with %v, want EOF", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal did not end within 30s of its shell's exit while an escaped process held it open")
	}
}
