package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent/spawn"
)

// spare is a spawn stage that has started and joined the user cgroup and
// waits for the one request it will serve (see package spawn). Keeping one
// ready takes the start of a Go runtime off every execution's critical path.
type spare struct {
	pid     int
	done    <-chan exitStatus
	ctl     *os.File // our end of the control pipe
	pipes   *pipes   // stdio; the child's ends are closed here
	channel *os.File // our end of the kernel channel (unused for plain execs)
	// outW and errW are our own copies of the stdout and stderr write ends,
	// which a kernel's streams need for their markers. A plain exec closes
	// them at once, or its pipes would never reach end of file.
	outW, errW *os.File
	// Without isolation (ServeUnisolated) there is no spawn stage: start
	// runs the program and held are the child's ends it keeps until then.
	start func(spawn.Request) error
	held  []*os.File
}

// newSpare starts a spawn stage and sends it the sandbox's config.
func (a *Agent) newSpare() (*spare, error) {
	if a.unisolated {
		return a.newPlainSpare()
	}
	p, err := newPipes()
	if err != nil {
		return nil, fmt.Errorf("pipes: %w", err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		p.closeAll()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	defer ctlR.Close()
	chFDs, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		p.closeAll()
		ctlW.Close()
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	chOurs, chTheirs := os.NewFile(uintptr(chFDs[0]), "channel"), os.NewFile(uintptr(chFDs[1]), "channel-kernel")
	defer chTheirs.Close()
	cgSpec, _ := json.Marshal(a.cg.Spec(spawn.FirstCgrFD))
	cfg, _ := json.Marshal(spawn.Config{
		UID:       a.cfg.UserUID,
		Cgroup:    cgSpec,
		OpenFiles: a.cfg.OpenFiles,
		FileSize:  a.cfg.FileSize,
		Landlock:  a.cfg.Landlock,
		WritePath: []string{a.cfg.Workspace, "/tmp", "/dev/shm"},
	})
	files := []uintptr{p.stdinR.Fd(), p.stdoutW.Fd(), p.stderrW.Fd(), chTheirs.Fd(), ctlR.Fd()}
	for _, f := range a.cg.Files() {
		files = append(files, f.Fd())
	}
	pid, done, err := a.reaper.start(func() (int, error) {
		return syscall.ForkExec("/proc/self/exe", []string{"kiln-spawn", spawn.Arg}, &syscall.ProcAttr{
			// One runtime thread is plenty for a process that only waits,
			// and every thread counts against the user's pids limit.
			Env:   []string{"GOMAXPROCS=1"},
			Files: files,
			Sys:   &syscall.SysProcAttr{Setsid: true},
		})
	})
	outW, errW := dupFile(p.stdoutW), dupFile(p.stderrW)
	p.closeChildEnds()
	if err != nil || outW == nil || errW == nil {
		ctlW.Close()
		chOurs.Close()
		closeFiles(outW, errW)
		p.closeAll()
		return nil, fmt.Errorf("start spawn stage: %v", err)
	}
	s := &spare{pid: pid, done: done, ctl: ctlW, pipes: p, channel: chOurs, outW: outW, errW: errW}
	if _, err := ctlW.Write(append(cfg, '\n')); err != nil {
		s.discard()
		return nil, fmt.Errorf("configure spawn stage: %w", err)
	}
	return s, nil
}

// launch hands the spare its request; from here on it is the user's process.
func (s *spare) launch(req spawn.Request) error {
	if s.start != nil {
		return s.start(req)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if len(b) > spawn.MaxRequest {
		return fmt.Errorf("argv and environment are %d bytes; the limit is %d", len(b), spawn.MaxRequest)
	}
	_, err = s.ctl.Write(b)
	if cerr := s.ctl.Close(); err == nil {
		err = cerr
	}
	return err
}

// alive reports whether the spare is still waiting.
func (s *spare) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// discard closes the spare's pipes; it then exits on its own.
func (s *spare) discard() {
	closeFiles(s.ctl, s.channel, s.outW, s.errW)
	closeFiles(s.held...)
	s.pipes.closeAll()
}

// dupFile duplicates f close-on-exec, or returns nil.
func dupFile(f *os.File) *os.File {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), f.Name())
}

// takeSpare returns the waiting spare, or a new one if there is none or it
// died (user code may kill it: it runs as the same user).
func (a *Agent) takeSpare() (*spare, error) {
	a.mu.Lock()
	s := a.spare
	a.spare = nil
	a.mu.Unlock()
	if s != nil && s.alive() {
		return s, nil
	}
	if s != nil {
		s.discard()
	}
	return a.newSpare()
}

// refill makes sure a spare is waiting for the next execution.
func (a *Agent) refill() {
	a.mu.Lock()
	have := a.spare != nil
	a.mu.Unlock()
	if have {
		return
	}
	s, err := a.newSpare()
	if err != nil {
		a.log.Warn("cannot start a spare spawn stage", "err", err)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.spare != nil {
		s.discard()
		return
	}
	a.spare = s
}
