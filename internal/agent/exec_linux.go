package agent

import (
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent/spawn"
	"github.com/kiln-dev/kiln/internal/cgroups"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// drainGrace is how long output is still collected after the main process
// exits, for descendants that hold the pipes open. The exec ends after it.
const drainGrace = 100 * time.Millisecond

// execution is one running exec request.
type execution struct {
	id       uint64
	pid      int
	stdin    *stdinQueue // open stdin, or nil
	output   atomic.Int64
	limit    int64
	canceled atomic.Bool
	timedOut atomic.Bool
	truncate atomic.Bool
	scope    string
	since    int64       // when it was launched, in /proc/PID/stat's start time (clock ticks since boot)
	ended    atomic.Bool // once set, nothing may be killed on this exec's behalf
}

// kill stops the exec: the whole sandbox or its own group, as it asked.
// Once the exec has ended it does nothing, so that a late timer or output
// pump cannot hit the processes of the next exec or a waiting spare.
func (x *execution) kill(a *Agent) {
	if x.ended.Load() {
		return
	}
	if x.scope == protocol.KillGroup {
		a.killCell(x)
		return
	}
	a.killAll()
}

func (a *Agent) startExec(id uint64, req protocol.Exec) {
	if msg := validateExec(req); msg != "" {
		a.fail(id, protocol.ErrInvalid, msg)
		return
	}
	a.mu.Lock()
	_, dup := a.execs[id]
	a.mu.Unlock()
	if dup {
		a.fail(id, protocol.ErrBusy, "an exec with this id is running")
		return
	}
	var in *stdinQueue
	if req.StdinOpen {
		// Registered now, not when the process starts, so that input the
		// service sends right behind the request is kept.
		ok := false
		if in, ok = a.openStdin(id, req.Stdin); !ok {
			a.fail(id, protocol.ErrBusy, "a request with this id is running")
			return
		}
	}
	go a.runExec(id, req, in)
}

func validateExec(req protocol.Exec) string {
	switch {
	case len(req.Argv) == 0 || req.Argv[0] == "":
		return "argv is empty"
	case req.TimeoutMs <= 0:
		return "timeout_ms must be positive"
	case req.OutputBytes <= 0:
		return "output_bytes must be positive"
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
	if req.Dir != "" && (path.IsAbs(req.Dir) || !isLocal(req.Dir)) {
		return "dir must be a relative path inside the workspace"
	}
	return ""
}

func isLocal(p string) bool {
	c := path.Clean(p)
	return c != ".." && !strings.HasPrefix(c, "../")
}

func (a *Agent) runExec(id uint64, req protocol.Exec, in *stdinQueue) {
	if in != nil {
		defer a.closeStdin(id)
	}
	x := &execution{id: id, stdin: in, limit: req.OutputBytes, scope: req.KillScope}
	for _, op := range req.Files {
		if err := a.writeForExec(op); err != nil {
			a.fail(id, errorCode(err), describe(op.Path, err))
			return
		}
	}
	dir := a.cfg.Workspace
	if req.Dir != "" {
		dir = path.Join(dir, path.Clean(req.Dir))
	}
	sreq := spawn.Request{Argv: req.Argv, Env: append(append([]string{}, a.cfg.Env...), req.Env...), Dir: dir}

	a.cg.ResetPeak()
	before := a.usage()
	start := time.Now()
	x.since = bootTicks()
	s, err := a.launch(sreq)
	if err != nil {
		a.fail(id, protocol.ErrInternal, "start: "+err.Error())
		return
	}
	pipes := s.pipes
	defer pipes.closeAll()
	closeFiles(s.channel, s.outW, s.errW) // a plain exec has no kernel channel and no markers
	// The next execution's spare starts when this one is over, so that it
	// never counts against this one's memory and pids.
	defer func() { go a.refill() }()
	x.pid = s.pid
	a.mu.Lock()
	a.execs[id] = x
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.execs, id)
		a.mu.Unlock()
	}()
	a.out.Send(id, protocol.TStarted, protocol.Started{Pid: s.pid})

	ended := make(chan struct{})
	defer close(ended)
	go a.feedStdin(x, pipes.stdinW, req, ended)
	var readers sync.WaitGroup
	readers.Add(2)
	go a.pump(x, pipes.stdoutR, protocol.TStdout, &readers)
	go a.pump(x, pipes.stderrR, protocol.TStderr, &readers)

	timer := time.AfterFunc(time.Duration(req.TimeoutMs)*time.Millisecond, func() {
		x.timedOut.Store(true)
		x.kill(a)
	})
	st := <-s.done
	timer.Stop()
	stopped := x.timedOut.Load() || x.canceled.Load() || x.truncate.Load()
	if x.scope == protocol.KillGroup && stopped {
		a.killCell(x) // what it started, after the leader died
	}
	if stopped && !a.unisolated {
		a.awaitGone(x)
	}
	waitGrace(&readers, drainGrace)
	pipes.closeReadEnds()
	readers.Wait()

	x.ended.Store(true)
	after := a.usage()
	a.out.Send(id, protocol.TExit, exitInfo(x, st, time.Since(start), before, after))
}

// launch gives req to a spare, retrying once with a fresh spare if the one
// taken died just before (user code can kill spares).
func (a *Agent) launch(req spawn.Request) (*spare, error) {
	s, err := a.takeSpare()
	if err != nil {
		return nil, err
	}
	if err := s.launch(req); err == nil {
		return s, nil
	}
	s.discard()
	if s, err = a.newSpare(); err != nil {
		return nil, err
	}
	if err := s.launch(req); err != nil {
		s.discard()
		return nil, err
	}
	return s, nil
}

// pump forwards one output stream, stopping the exec when the output limit
// is reached.
func (a *Agent) pump(x *execution, r *os.File, typ string, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			total := x.output.Add(int64(n))
			keep := n
			if total > x.limit {
				keep = n - int(total-x.limit)
				if keep < 0 {
					keep = 0
				}
				if !x.truncate.Swap(true) {
					x.kill(a)
				}
			}
			if keep > 0 {
				a.out.Send(x.id, typ, protocol.Data{Data: buf[:keep]})
			}
		}
		if err != nil {
			return
		}
	}
}

// feedStdin writes the exec's stdin into its pipe: the request's, or for
// open stdin what arrives until EOF or the exec ends.
func (a *Agent) feedStdin(x *execution, w *os.File, req protocol.Exec, ended <-chan struct{}) {
	defer w.Close()
	if x.stdin == nil {
		if len(req.Stdin) > 0 {
			w.Write(req.Stdin)
		}
		return
	}
	for {
		p, eof, lost, ok := x.stdin.take(protocol.ChunkSize, ended)
		if !ok {
			return
		}
		if lost {
			a.out.Send(x.id, protocol.TStderr, protocol.Data{Data: []byte("\n" + stdinLost + "\n")})
		}
		if eof {
			return
		}
		if _, err := w.Write(p); err != nil {
			return
		}
	}
}

// control handles signal and cancel messages for a running exec.
func (a *Agent) control(m *protocol.Message) {
	a.mu.Lock()
	x := a.execs[m.ID]
	a.mu.Unlock()
	if x == nil {
		return // it already ended; the exit event says how
	}
	switch m.Type {
	case protocol.TCancel:
		x.canceled.Store(true)
		x.kill(a)
	case protocol.TSignal:
		var s protocol.Signal
		if m.Decode(&s) != nil {
			return
		}
		if sig := unix.SignalNum(s.Name); sig != 0 {
			unix.Kill(-x.pid, sig)
		}
	}
}

// killAll kills every process in the sandbox but the agent. kill(-1) from
// PID 1 reaches all of them in one pass under the kernel's tasklist lock,
// so a process cannot fork its way out, and setsid or a double fork does not
// help either. That holds for a container's agent too, which is its PID 1;
// an unisolated agent that is not (the unboxed test backend) walks its
// descendants instead: its kill(-1) would reach every process of the user.
func (a *Agent) killAll() {
	if a.unisolated && os.Getpid() != 1 {
		a.killDescendants()
		return
	}
	unix.Kill(-1, unix.SIGKILL)
}

func exitInfo(x *execution, st exitStatus, wall time.Duration, before, after cgroups.Usage) protocol.ExitInfo {
	info := protocol.ExitInfo{
		Code:            st.ws.ExitStatus(),
		WallNs:          wall.Nanoseconds(),
		CPUNs:           (after.CPUTime - before.CPUTime).Nanoseconds(),
		PeakMemory:      after.PeakMemoryBytes,
		OutputBytes:     min(x.output.Load(), x.limit),
		TimedOut:        x.timedOut.Load(),
		Canceled:        x.canceled.Load(),
		OOMKilled:       after.OOMKills > before.OOMKills,
		PidsLimited:     after.PidsLimitHits > before.PidsLimitHits,
		OutputTruncated: x.truncate.Load(),
	}
	if st.ws.Signaled() {
		info.Code = -1
		info.Signal = unix.SignalName(st.ws.Signal())
	}
	if info.CPUNs <= 0 {
		info.CPUNs = st.ru.Utime.Nano() + st.ru.Stime.Nano()
	}
	if info.PeakMemory == 0 {
		info.PeakMemory = st.ru.Maxrss * 1024
	}
	return info
}

func waitGrace(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

type pipes struct {
	stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW *os.File
}

func newPipes() (*pipes, error) {
	p := &pipes{}
	var err error
	if p.stdinR, p.stdinW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if p.stdoutR, p.stdoutW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, err
	}
	if p.stderrR, p.stderrW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, err
	}
	return p, nil
}

func (p *pipes) closeChildEnds() { closeFiles(p.stdinR, p.stdoutW, p.stderrW) }
func (p *pipes) closeReadEnds()  { closeFiles(p.stdoutR, p.stderrR) }
func (p *pipes) closeAll() {
	closeFiles(p.stdinR, p.stdinW, p.stdoutR, p.stdoutW, p.stderrR, p.stderrW)
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
