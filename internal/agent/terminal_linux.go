package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent/spawn"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// A terminal is an interactive shell on a pseudo-terminal: the shell is
// started like any user program (a spawn stage: the user cgroup, the
// unprivileged user, Landlock, seccomp), but with the pty's slave as its
// stdio and controlling terminal. Its output is flow-controlled
// (protocol.TermWindow), its queued input bounded (protocol.TermMaxInput),
// and it ends with its shell, on term_close, or with the agent.

// terminal is one open terminal.
type terminal struct {
	id     uint64
	pid    int
	master *os.File
	input  chan []byte // keystrokes for the writer; bounded in bytes by queued
	ended  chan struct{}

	mu     sync.Mutex
	cond   *sync.Cond
	credit int64 // output the agent may still send before an ack
	chunks int   // term_output messages it may still send
	queued int   // bytes in input
	closed bool
}

// termMsg handles every terminal message.
func (a *Agent) termMsg(m *protocol.Message) {
	if m.Type == protocol.TTermOpen {
		var req protocol.TermOpen
		if err := m.Decode(&req); err != nil {
			a.fail(m.ID, protocol.ErrInvalid, err.Error())
			return
		}
		a.openTerminal(m.ID, req)
		return
	}
	a.mu.Lock()
	t := a.terms[m.ID]
	a.mu.Unlock()
	if t == nil {
		return // it already ended; its exit event said so
	}
	switch m.Type {
	case protocol.TTermInput:
		var d protocol.Data
		if m.Decode(&d) == nil && len(d.Data) > 0 {
			t.write(d.Data)
		}
	case protocol.TTermResize:
		var sz protocol.TermSize
		if m.Decode(&sz) == nil && sz.Rows > 0 && sz.Cols > 0 {
			// The kernel sends SIGWINCH to the terminal's foreground group.
			unix.IoctlSetWinsize(int(t.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: sz.Rows, Col: sz.Cols})
		}
	case protocol.TTermAck:
		var ack protocol.TermAck
		if m.Decode(&ack) == nil && ack.Bytes >= 0 && ack.Chunks >= 0 {
			t.mu.Lock()
			t.credit = min(t.credit+ack.Bytes, protocol.TermWindow)
			t.chunks = min(t.chunks+ack.Chunks, protocol.TermWindowChunks)
			t.cond.Broadcast()
			t.mu.Unlock()
		}
	case protocol.TTermClose:
		t.hangUp()
	}
}

func validateTerm(req protocol.TermOpen) string {
	if req.Rows == 0 || req.Cols == 0 {
		return "rows and cols must be positive"
	}
	for _, s := range append(append([]string{}, req.Argv...), req.Env...) {
		if strings.IndexByte(s, 0) >= 0 {
			return "argv and env may not contain NUL bytes"
		}
	}
	for _, e := range req.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return "env entry " + e + " is not KEY=VALUE"
		}
	}
	return ""
}

func (a *Agent) openTerminal(id uint64, req protocol.TermOpen) {
	if msg := validateTerm(req); msg != "" {
		a.fail(id, protocol.ErrInvalid, msg)
		return
	}
	t := &terminal{id: id, input: make(chan []byte, 64), ended: make(chan struct{}), credit: protocol.TermWindow, chunks: protocol.TermWindowChunks}
	t.cond = sync.NewCond(&t.mu)
	a.mu.Lock()
	if a.terms == nil {
		a.terms = map[uint64]*terminal{}
	}
	switch {
	case a.terms[id] != nil:
		a.mu.Unlock()
		a.fail(id, protocol.ErrBusy, "a terminal with this id is open")
		return
	case len(a.terms) >= protocol.MaxTerminals:
		a.mu.Unlock()
		a.fail(id, protocol.ErrBusy, fmt.Sprintf("%d terminals are open; that is the most a session may have", protocol.MaxTerminals))
		return
	}
	a.terms[id] = t // holds the place while the shell starts
	a.mu.Unlock()
	done, err := a.startTerminal(t, req)
	if err != nil {
		a.mu.Lock()
		delete(a.terms, id)
		a.mu.Unlock()
		a.fail(id, protocol.ErrInternal, "terminal: "+err.Error())
		return
	}
	a.out.Send(id, protocol.TStarted, protocol.Started{Pid: t.pid})
	go a.runTerminal(t, done)
}

// startTerminal makes the pty and starts the shell on it.
func (a *Agent) startTerminal(t *terminal, req protocol.TermOpen) (<-chan exitStatus, error) {
	master, slave, err := openPTY()
	if err != nil {
		return nil, err
	}
	defer slave.Close()
	unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: req.Rows, Col: req.Cols})
	// The slave belongs to its opener; the user may need to reopen it by
	// name (/dev/tty finds it without). Without CAP_CHOWN this fails, and
	// the shell works all the same.
	unix.Fchown(int(slave.Fd()), a.cfg.UserUID, a.cfg.UserUID)
	argv := req.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/bash", "-i"}
		if _, err := os.Stat("/bin/bash"); err != nil {
			argv = []string{"/bin/sh", "-i"}
		}
	}
	env := append(append(append([]string{}, a.cfg.Env...), "TERM=xterm-256color"), req.Env...)
	sreq := spawn.Request{Argv: argv, Env: env, Dir: a.cfg.Workspace}
	var pid int
	var done <-chan exitStatus
	if a.unisolated {
		pid, done, err = a.reaper.start(func() (int, error) {
			fd := slave.Fd()
			argv := a.withRlimits(argv)
			return syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
				Dir: sreq.Dir, Env: env, Files: []uintptr{fd, fd, fd},
				Sys: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0},
			})
		})
	} else {
		pid, done, err = a.spawnOnTTY(slave, sreq)
	}
	if err != nil {
		master.Close()
		return nil, err
	}
	t.pid, t.master = pid, master
	return done, nil
}

// openPTY opens a new pseudo-terminal pair in this mount namespace's
// devpts: its master, close-on-exec, and its slave.
func openPTY() (master, slave *os.File, err error) {
	// Non-blocking, so that Go polls it and Close wakes a read or write in
	// progress: a process that left the shell's session may hold the slave
	// open, and the master would then never reach end of file.
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master = os.NewFile(uintptr(m), "ptmx")
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	// TIOCGPTPEER opens the slave through the master, never by a name in
	// /dev/pts that something else could have replaced.
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		master.Close()
		return nil, nil, fmt.Errorf("open pty slave: %w", errno)
	}
	return master, os.NewFile(s, "pts"), nil
}

// spawnOnTTY starts a spawn stage whose stdio is the slave, in a new
// session with the slave as its controlling terminal, and gives it req.
func (a *Agent) spawnOnTTY(slave *os.File, req spawn.Request) (int, <-chan exitStatus, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return 0, nil, err
	}
	defer ctlR.Close()
	defer ctlW.Close()
	cgSpec, _ := json.Marshal(a.cg.Spec(spawn.FirstCgrFD))
	cfg, _ := json.Marshal(spawn.Config{
		UID:       a.cfg.UserUID,
		Cgroup:    cgSpec,
		OpenFiles: a.cfg.OpenFiles,
		FileSize:  a.cfg.FileSize,
		Landlock:  a.cfg.Landlock,
		WritePath: []string{a.cfg.Workspace, "/tmp", "/dev/shm"},
	})
	b, err := json.Marshal(req)
	if err != nil {
		return 0, nil, err
	}
	if len(b) > spawn.MaxRequest {
		return 0, nil, fmt.Errorf("argv and environment are %d bytes; the limit is %d", len(b), spawn.MaxRequest)
	}
	fd := slave.Fd()
	// fd 3 is the kernel channel of a spawn stage; a terminal has none, and
	// the slave there is closed at exec like every descriptor above 2.
	files := []uintptr{fd, fd, fd, fd, ctlR.Fd()}
	for _, f := range a.cg.Files() {
		files = append(files, f.Fd())
	}
	pid, done, err := a.reaper.start(func() (int, error) {
		return syscall.ForkExec("/proc/self/exe", []string{"kiln-spawn", spawn.Arg}, &syscall.ProcAttr{
			Env:   []string{"GOMAXPROCS=1"},
			Files: files,
			Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0},
		})
	})
	if err != nil {
		return 0, nil, fmt.Errorf("start spawn stage: %w", err)
	}
	// The pipe holds both documents (well under its buffer for a shell's
	// request; a larger one blocks until the stage reads it).
	if _, err := ctlW.Write(append(append(cfg, '\n'), b...)); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return 0, nil, fmt.Errorf("configure spawn stage: %w", err)
	}
	return pid, done, nil
}

// runTerminal serves a started terminal until its shell exits, then kills
// what is left of it and sends its exit.
func (a *Agent) runTerminal(t *terminal, done <-chan exitStatus) {
	pumped := make(chan struct{})
	go func() { a.pumpTerminal(t); close(pumped) }()
	go t.writeLoop()
	st := <-done
	// The shell is gone; its jobs and anything else on its terminal go too,
	// so that no process of a closed terminal is left behind.
	a.killTerminal(t)
	select {
	case <-pumped:
	case <-time.After(drainGrace):
	}
	t.mu.Lock()
	t.closed = true
	t.cond.Broadcast()
	t.mu.Unlock()
	close(t.ended)
	t.master.Close() // ends a read still blocked on the master
	<-pumped
	a.mu.Lock()
	delete(a.terms, t.id)
	a.mu.Unlock()
	info := protocol.ExitInfo{Code: st.ws.ExitStatus()}
	if st.ws.Signaled() {
		info.Code = -1
		info.Signal = unix.SignalName(st.ws.Signal())
	}
	a.out.Send(t.id, protocol.TExit, info)
}

// pumpTerminal sends what the terminal prints, never more than the credit
// the service has returned: without credit it stops reading, so a flood
// waits in the pty (and then in the writer) instead of in memory.
func (a *Agent) pumpTerminal(t *terminal) {
	buf := make([]byte, 32<<10)
	for {
		t.mu.Lock()
		for (t.credit <= 0 || t.chunks <= 0) && !t.closed {
			t.cond.Wait()
		}
		if t.closed {
			t.mu.Unlock()
			return
		}
		n := int(min(int64(len(buf)), t.credit))
		t.mu.Unlock()
		n, err := t.master.Read(buf[:n])
		if n > 0 {
			t.mu.Lock()
			t.credit -= int64(n)
			t.chunks--
			t.mu.Unlock()
			a.out.Send(t.id, protocol.TTermOutput, protocol.Data{Data: buf[:n]})
		}
		if err != nil {
			return // EIO once no process holds the slave
		}
	}
}

// write queues keystrokes; past TermMaxInput waiting they are dropped (a
// shell that reads nothing must not make the agent hold more).
func (t *terminal) write(p []byte) {
	t.mu.Lock()
	if t.closed || t.queued+len(p) > protocol.TermMaxInput {
		t.mu.Unlock()
		return
	}
	t.queued += len(p)
	t.mu.Unlock()
	select {
	case t.input <- append([]byte(nil), p...):
	default: // 64 small writes waiting: drop, as above
		t.mu.Lock()
		t.queued -= len(p)
		t.mu.Unlock()
	}
}

func (t *terminal) writeLoop() {
	for {
		select {
		case p := <-t.input:
			t.mu.Lock()
			t.queued -= len(p)
			t.mu.Unlock()
			if _, err := t.master.Write(p); err != nil {
				return
			}
		case <-t.ended:
			return
		}
	}
}

// hangUp is what closing a terminal window does: SIGHUP to the shell's
// session, then, after a moment for it to exit, SIGKILL to what is left.
func (t *terminal) hangUp() {
	unix.Kill(-t.pid, unix.SIGHUP)
	unix.Kill(-t.pid, unix.SIGCONT)
	go func() {
		select {
		case <-t.ended:
		case <-time.After(500 * time.Millisecond):
			unix.Kill(-t.pid, unix.SIGKILL)
		}
	}()
}

// killTerminal kills every process of the terminal's session and every
// descendant of its shell, until none is left (one with SIGKILL pending
// cannot fork, so each round leaves fewer).
func (a *Agent) killTerminal(t *terminal) {
	for range 100 {
		procs := processes()
		found := false
		for p, st := range procs {
			if st.zombie || p == os.Getpid() {
				continue
			}
			if st.sid == t.pid || descends(p, procs, map[int]bool{t.pid: true}) {
				unix.Kill(p, unix.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// terminalPids are the shells of the open terminals, which a stopped
// program cell must not take down with what it started.
func (a *Agent) terminalPids(keep map[int]bool) {
	for _, t := range a.terms {
		if t.pid != 0 {
			keep[t.pid] = true
		}
	}
}
