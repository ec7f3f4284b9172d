package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent/spawn"
	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// kernelStartTimeout bounds how long a kernel may take to say Ready.
const kernelStartTimeout = 30 * time.Second

// kernel is one running REPL kernel: a user process with a channel on fd 3
// and its stdout and stderr pumped by streams.
type kernel struct {
	lang     string
	pid      int
	done     <-chan exitStatus
	conn     net.Conn
	lines    chan []byte   // lines from the kernel; closed when the channel ends
	out, err *stream       // stdout, stderr
	order    *order        // puts pipe output and channel output in order
	ready    []byte        // its Ready message
	busy     bool          // a cell or query is using it (guarded by Agent.mu)
	gone     chan struct{} // closed when the process has been reaped
	status   exitStatus    // valid after gone
}

// startKernel launches k's kernel through a spare and waits for Ready.
func (a *Agent) startKernel(spec protocol.Kernel, env []string) (*kernel, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("no kernel command given")
	}
	s, err := a.launch(spawn.Request{
		Argv:    spec.Argv,
		Env:     append(append(append([]string{}, a.cfg.Env...), env...), spec.Env...),
		Dir:     a.cfg.Workspace,
		Channel: true,
	})
	if err != nil {
		return nil, err
	}
	go a.refill()
	s.pipes.stdinW.Close() // kernels get their input through the channel
	conn, err := net.FileConn(s.channel)
	s.channel.Close()
	if err != nil {
		s.discard()
		return nil, err
	}
	if spec.Source != "" {
		// The loader on the kernel's command line reads its source first.
		conn.SetWriteDeadline(time.Now().Add(kernelStartTimeout))
		_, err = io.WriteString(conn, spec.Source)
		conn.SetWriteDeadline(time.Time{})
		if err != nil {
			conn.Close()
			s.discard()
			return nil, fmt.Errorf("the %s kernel did not take its source: %w", spec.Language, err)
		}
	}
	o := newOrder()
	k := &kernel{
		lang:  spec.Language,
		pid:   s.pid,
		done:  s.done,
		conn:  conn,
		lines: make(chan []byte, linesQueued),
		order: o,
		out:   newStream(s.pipes.stdoutR, s.outW, o, 0),
		err:   newStream(s.pipes.stderrR, s.errW, o, 1),
		gone:  make(chan struct{}),
	}
	go k.read()
	go func() {
		k.status = <-k.done
		close(k.gone)
	}()
	select {
	case line, ok := <-k.lines:
		var r kernelproto.Ready
		if ok && json.Unmarshal(line, &r) == nil && r.Type == kernelproto.TReady {
			k.ready = line
			k.order.start(line)
			return k, nil
		}
		k.kill()
		if !ok {
			return nil, fmt.Errorf("the %s kernel exited before it was ready", spec.Language)
		}
		return nil, fmt.Errorf("the %s kernel said %.100q before it was ready", spec.Language, line)
	case <-time.After(kernelStartTimeout):
		k.kill()
		return nil, fmt.Errorf("the %s kernel was not ready within %v", spec.Language, kernelStartTimeout)
	}
}

func (k *kernel) send(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	k.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err = k.conn.Write(append(b, '\n'))
	return err
}

// interrupt sends SIGINT to the kernel's process group.
func (k *kernel) interrupt() { unix.Kill(-k.pid, unix.SIGINT) }

// kill ends the kernel's process group and waits for the kernel itself.
func (k *kernel) kill() {
	unix.Kill(-k.pid, unix.SIGKILL)
	unix.Kill(k.pid, unix.SIGKILL)
	select {
	case <-k.gone:
	case <-time.After(5 * time.Second):
	}
	k.conn.Close()
	k.out.detach()
	k.err.detach()
	k.out.close()
	k.err.close()
}

// alive reports whether the kernel process still runs.
func (k *kernel) alive() bool {
	select {
	case <-k.gone:
		return false
	default:
		return true
	}
}

// describeExit says in plain words how a kernel process ended.
func describeExit(lang string, st exitStatus) string {
	if st.ws.Signaled() {
		return fmt.Sprintf("the %s kernel was killed by %s; its state is lost and the next cell starts a new one", lang, unix.SignalName(st.ws.Signal()))
	}
	return fmt.Sprintf("the %s kernel exited with status %d; its state is lost and the next cell starts a new one", lang, st.ws.ExitStatus())
}

// exitCode is how a kernel that a cell ended (process.exit(), os._exit(),
// a signal) ended, as a shell reports a process: its status, or 128+N for
// signal N.
func exitCode(st exitStatus) *int {
	code := st.ws.ExitStatus()
	if st.ws.Signaled() {
		code = 128 + int(st.ws.Signal())
	}
	return &code
}

// takeKernel returns the running kernel of spec's language, marked busy,
// starting one if needed. started says whether it was started now.
func (a *Agent) takeKernel(spec protocol.Kernel) (k *kernel, started bool, err error) {
	a.mu.Lock()
	// A kernel's command line (its whole source) comes once per language;
	// later cells name only the language.
	if len(spec.Argv) > 0 {
		a.specs[spec.Language] = spec
	} else if known, ok := a.specs[spec.Language]; ok {
		spec = known
	}
	k = a.kernels[spec.Language]
	if k != nil && k.busy {
		a.mu.Unlock()
		return nil, false, errBusy
	}
	if k != nil && !k.alive() {
		delete(a.kernels, spec.Language)
		k = nil
	}
	if k != nil {
		k.busy = true
		a.mu.Unlock()
		return k, false, nil
	}
	a.mu.Unlock()
	k, err = a.startKernel(spec, nil)
	if err != nil {
		return nil, false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if other := a.kernels[spec.Language]; other != nil && other.alive() {
		go k.kill() // lost a race with another start
		return nil, false, errBusy
	}
	k.busy = true
	a.kernels[spec.Language] = k
	return k, true, nil
}

// releaseKernel marks k idle, or forgets it if it is gone.
func (a *Agent) releaseKernel(k *kernel, lost bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k.busy = false
	if lost && a.kernels[k.lang] == k {
		delete(a.kernels, k.lang)
	}
}

var errBusy = errors.New("the kernel is busy with another cell")

// restart kills the kernel of one language, or all of them.
func (a *Agent) restart(id uint64, r protocol.Restart) {
	a.mu.Lock()
	var victims []*kernel
	for lang, k := range a.kernels {
		if r.Language == "" || lang == r.Language {
			victims = append(victims, k)
			delete(a.kernels, lang)
		}
	}
	a.mu.Unlock()
	for _, k := range victims {
		k.kill()
	}
	a.out.Send(id, protocol.TOK, protocol.FileResult{})
}

// query forwards a Complete or Check to an idle kernel and returns its
// answer as the body of an ok.
func (a *Agent) query(id uint64, typ string, q protocol.KernelQuery) {
	k, _, err := a.takeKernel(q.Kernel)
	if err != nil {
		a.fail(id, codeFor(err), err.Error())
		return
	}
	// The kernel is released before the answer goes out: a client that
	// sends a cell as soon as it has the answer must find the kernel idle.
	var msg any = kernelproto.Check{Type: kernelproto.TCheck, Cell: "q", Code: q.Code}
	if typ == protocol.TComplete {
		msg = kernelproto.Complete{Type: kernelproto.TComplete, Cell: "q", Code: q.Code, Cursor: q.Cursor}
	}
	if err := k.send(msg); err != nil {
		a.releaseKernel(k, true)
		a.fail(id, protocol.ErrInternal, "kernel: "+err.Error())
		return
	}
	select {
	case line, ok := <-k.lines:
		if !ok {
			a.releaseKernel(k, true)
			a.fail(id, protocol.ErrInternal, describeExit(k.lang, k.waitStatus()))
			return
		}
		a.releaseKernel(k, false)
		a.out.Send(id, protocol.TOK, json.RawMessage(line))
	case <-time.After(10 * time.Second):
		a.releaseKernel(k, false)
		a.fail(id, protocol.ErrInternal, "the kernel did not answer within 10s")
	}
}

// waitStatus waits briefly for the kernel to be reaped and returns how it
// ended.
func (k *kernel) waitStatus() exitStatus {
	select {
	case <-k.gone:
	case <-time.After(2 * time.Second):
	}
	return k.status
}

func codeFor(err error) string {
	if errors.Is(err, errBusy) {
		return protocol.ErrBusy
	}
	return protocol.ErrInternal
}
