//go:build linux

// Package kerneltest runs a REPL kernel directly on the host, without a
// sandbox, with the descriptors the agent gives it: fd 3 a unix socket,
// stdout and stderr pipes, an empty stdin. The kernels' own tests use it,
// and the compatibility suite compares its results with the sandbox's.
// Linux only, like the kernels it starts on the host and their tests.
package kerneltest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/kernelproto"
)

// Kernel is a kernel running on the host.
type Kernel struct {
	T      testing.TB
	Cmd    *exec.Cmd
	Conn   net.Conn
	In     *bufio.Reader
	OutR   *os.File
	ErrR   *os.File
	Mu     sync.Mutex
	Stdout bytes.Buffer
	Stderr bytes.Buffer
	WG     sync.WaitGroup
	Ready  kernelproto.Ready
	Next   int

	// Ordered output (kernelproto): the kernel's order nonce, the highest
	// mark each pump has passed, the highest message taken, and whether a
	// cell is being collected (only then do the pumps wait at marks).
	// Guarded by Mu.
	nonce   []byte
	seen    [2]uint64
	sent    uint64
	open    bool
	changed chan struct{} // closed and replaced when any of them changes
}

// Result is what one cell produced.
type Result struct {
	Status   string
	Stdout   string
	Stderr   string
	Displays []kernelproto.Display // display and execute_result, in order
	Results  []kernelproto.Display // execute_result only
	Error    *kernelproto.Error
	ExitCode *int // from Done, for kernels whose cells have one
}

// Start starts the kernel argv (with env added) in dir (a temp dir if ""), waits for Ready, and
// stops the kernel when the test ends.
func Start(t testing.TB, argv, env []string, dir string) *Kernel {
	t.Helper()
	return StartBoot(t, argv, env, "", dir)
}

// StartBoot starts a kernel whose loader reads payload from fd 3 first, as
// the agent starts it (kernels.Spec.Boot); with an empty payload it is
// Start.
func StartBoot(t testing.TB, argv, env []string, payload, dir string) *Kernel {
	t.Helper()
	if len(argv) == 0 {
		t.Fatal("the kernel has no argv")
	}
	if _, err := os.Stat(argv[0]); err != nil {
		t.Skipf("kernel runtime %s not installed: %v", argv[0], err)
	}
	if dir == "" {
		dir = t.TempDir()
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "agent"), os.NewFile(uintptr(fds[1]), "kernel")
	ch, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	k := &Kernel{T: t, Conn: ch, In: bufio.NewReaderSize(ch, 1<<20), OutR: outR, ErrR: errR}
	k.Cmd = exec.Command(argv[0], argv[1:]...)
	k.Cmd.Dir = dir
	k.Cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8", "TMPDIR=" + os.TempDir()}, env...)
	k.Cmd.Stdout, k.Cmd.Stderr = outW, errW
	k.Cmd.ExtraFiles = []*os.File{theirs}
	k.Cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := k.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	outW.Close()
	errW.Close()
	if payload != "" {
		ch.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(ch, payload); err != nil {
			t.Fatalf("sending the kernel its source: %v", err)
		}
		ch.SetWriteDeadline(time.Time{})
	}
	k.WG.Add(2)
	go k.pump(outR, &k.Stdout, 0)
	go k.pump(errR, &k.Stderr, 1)
	t.Cleanup(k.Stop)
	line := k.Read(30 * time.Second)
	if err := json.Unmarshal(line, &k.Ready); err != nil || k.Ready.Type != kernelproto.TReady {
		t.Fatalf("first message %q is not ready (%v); stderr: %s", line, err, k.StderrText())
	}
	if nonce, err := hex.DecodeString(k.Ready.Order); err == nil && len(nonce) == kernelproto.OrderNonceLen {
		k.Mu.Lock()
		k.nonce = nonce
		k.Mu.Unlock()
	}
	return k
}

// pump copies pipe i into dst, stripping order marks and waiting at each,
// as the agent does, until its message has been taken.
func (k *Kernel) pump(r io.Reader, dst *bytes.Buffer, i int) {
	defer k.WG.Done()
	buf := make([]byte, 32<<10)
	var carry []byte
	for {
		n, err := r.Read(buf)
		data := append(carry, buf[:n]...)
		carry = nil
		for {
			k.Mu.Lock()
			nonce := k.nonce
			k.Mu.Unlock()
			if nonce == nil {
				k.Mu.Lock()
				dst.Write(data)
				k.Mu.Unlock()
				break
			}
			before, seq, after, found, keep := kernelproto.OrderSplit(nonce, data)
			k.Mu.Lock()
			dst.Write(before)
			if found {
				k.seen[i] = max(k.seen[i], seq)
				k.notifyLocked()
			}
			k.Mu.Unlock()
			if !found {
				carry = append([]byte(nil), data[len(data)-keep:]...)
				break
			}
			k.waitOrder(func() bool { return k.sent >= seq })
			data = after
		}
		if err != nil {
			k.Mu.Lock()
			dst.Write(carry)
			k.Mu.Unlock()
			return
		}
	}
}

// waitOrder waits (bounded, as the agent) until ok holds under Mu or no
// cell is being collected.
func (k *Kernel) waitOrder(ok func() bool) {
	var timeout <-chan time.Time
	for {
		k.Mu.Lock()
		if !k.open || ok() {
			k.Mu.Unlock()
			return
		}
		ch := k.changedLocked()
		k.Mu.Unlock()
		if timeout == nil {
			timeout = time.After(5 * time.Second)
		}
		select {
		case <-ch:
		case <-timeout:
			return
		}
	}
}

// changedLocked returns the channel the next change closes; Mu is held.
func (k *Kernel) changedLocked() chan struct{} {
	if k.changed == nil {
		k.changed = make(chan struct{})
	}
	return k.changed
}

// notifyLocked wakes the waiters; Mu is held.
func (k *Kernel) notifyLocked() {
	if k.changed != nil {
		close(k.changed)
		k.changed = nil
	}
}

// setOpen starts or ends the collection of a cell's output.
func (k *Kernel) setOpen(open bool) {
	k.Mu.Lock()
	k.open = open
	k.notifyLocked()
	k.Mu.Unlock()
}

// Take handles an ordered message of the cell being collected (env.Seq
// set): it waits until the pipes have passed its mark, appends a Stream's
// data to Stdout or Stderr, and lets the pipes go on. It says whether the
// message was a Stream.
func (k *Kernel) Take(env kernelproto.Envelope, line []byte) bool {
	if env.Seq > 0 {
		k.waitOrder(func() bool { return k.seen[0] >= env.Seq && k.seen[1] >= env.Seq })
	}
	stream := env.Type == kernelproto.TStream
	k.Mu.Lock()
	if stream {
		var m kernelproto.Stream
		MustUnmarshal(k.T, line, &m)
		if m.Name == "stderr" {
			k.Stderr.Write(m.Data)
		} else {
			k.Stdout.Write(m.Data)
		}
	}
	k.sent = max(k.sent, env.Seq)
	k.notifyLocked()
	k.Mu.Unlock()
	return stream
}

func (k *Kernel) StderrText() string {
	k.Mu.Lock()
	defer k.Mu.Unlock()
	return k.Stderr.String()
}

func (k *Kernel) Stop() {
	k.Conn.Close()
	if k.Cmd.Process != nil {
		syscall.Kill(-k.Cmd.Process.Pid, syscall.SIGKILL)
		k.Cmd.Wait()
	}
	k.WG.Wait()
}

// Read returns the next line from the kernel, failing the test on timeout.
func (k *Kernel) Read(timeout time.Duration) []byte {
	k.T.Helper()
	k.Conn.SetReadDeadline(time.Now().Add(timeout))
	line, err := k.In.ReadBytes('\n')
	if err != nil {
		k.T.Fatalf("reading from the kernel: %v; stderr: %s", err, k.StderrText())
	}
	if len(line) > kernelproto.MaxLine {
		k.T.Fatalf("kernel sent a %d-byte line", len(line))
	}
	return line
}

func (k *Kernel) Send(msg any) {
	k.T.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		k.T.Fatal(err)
	}
	if _, err := k.Conn.Write(append(b, '\n')); err != nil {
		k.T.Fatalf("sending to the kernel: %v", err)
	}
}

func (k *Kernel) CellID() string {
	k.Next++
	return fmt.Sprintf("c%d", k.Next)
}

// Exec runs one cell and collects everything it produced.
func (k *Kernel) Exec(code string) Result {
	k.T.Helper()
	return k.ExecWith(kernelproto.Execute{Code: code}, 60*time.Second)
}

// ExecWith runs a cell with stdin or other fields set.
func (k *Kernel) ExecWith(req kernelproto.Execute, timeout time.Duration) Result {
	k.T.Helper()
	return k.ExecInput(req, nil, timeout)
}

// ExecInput runs a cell whose open stdin in serves (req.StdinOpen is set
// when in is not nil).
func (k *Kernel) ExecInput(req kernelproto.Execute, in *Stdin, timeout time.Duration) Result {
	k.T.Helper()
	req.Type, req.Cell = kernelproto.TExecute, k.CellID()
	req.StdinOpen = in != nil
	k.Mu.Lock()
	outStart, errStart := k.Stdout.Len(), k.Stderr.Len()
	k.Mu.Unlock()
	in.start(k, req.Cell)
	defer in.stop()
	k.setOpen(true)
	defer k.setOpen(false)
	k.Send(req)
	var res Result
	for {
		line := k.Read(timeout)
		var env kernelproto.Envelope
		if err := json.Unmarshal(line, &env); err != nil {
			k.T.Fatalf("bad message %q: %v", line, err)
		}
		if env.Cell != req.Cell {
			k.T.Fatalf("message for cell %q while %q runs: %s", env.Cell, req.Cell, line)
		}
		if in.Handle(env, line) || k.Take(env, line) {
			continue
		}
		switch env.Type {
		case kernelproto.TDisplay, kernelproto.TExecuteResult:
			var d kernelproto.Display
			MustUnmarshal(k.T, line, &d)
			res.Displays = append(res.Displays, d)
			if env.Type == kernelproto.TExecuteResult {
				res.Results = append(res.Results, d)
			}
		case kernelproto.TError:
			res.Error = new(kernelproto.Error)
			MustUnmarshal(k.T, line, res.Error)
		case kernelproto.TDone:
			var d kernelproto.Done
			MustUnmarshal(k.T, line, &d)
			res.Status, res.ExitCode = d.Status, d.ExitCode
			k.setOpen(false)
			k.Drain()
			k.Mu.Lock()
			res.Stdout = k.Stdout.String()[outStart:]
			res.Stderr = k.Stderr.String()[errStart:]
			k.Mu.Unlock()
			return res
		default:
			k.T.Fatalf("unexpected message during a cell: %s", line)
		}
	}
}

// Drain waits until both output pipes are empty, as the agent does after
// Done: the kernel flushed before Done, so what it wrote is in the pipes.
func (k *Kernel) Drain() {
	for i := 0; i < 200; i++ {
		if pending(k.OutR) == 0 && pending(k.ErrR) == 0 {
			time.Sleep(2 * time.Millisecond) // let the pumps append what they read
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func pending(f *os.File) int {
	n := 0
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	}
	return n
}

// Request sends a complete or check message and returns the answer line.
func (k *Kernel) Request(msg any) []byte {
	k.T.Helper()
	k.Send(msg)
	return k.Read(10 * time.Second)
}

// Interrupt sends SIGINT to the kernel's process group, as the agent does.
func (k *Kernel) Interrupt() {
	syscall.Kill(-k.Cmd.Process.Pid, syscall.SIGINT)
}

func MustUnmarshal(t testing.TB, line []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(line, v); err != nil {
		t.Fatalf("bad message %q: %v", line, err)
	}
}

// Text returns the text/plain of a display, unquoted.
func Text(t testing.TB, d kernelproto.Display) string {
	t.Helper()
	var s string
	if raw, ok := d.Data["text/plain"]; ok {
		MustUnmarshal(t, raw, &s)
	}
	return s
}

// Stdin plays the agent's side of a cell's open stdin: it answers the
// kernel's stdin requests one at a time and in order, each once Write or
// Close has given it something, as the agent does. A nil *Stdin answers
// nothing (Handle says false).
type Stdin struct {
	mu    sync.Mutex
	k     *Kernel
	cell  string
	data  []byte
	eof   bool
	asked int
	reqs  []kernelproto.StdinRequest
	waits []kernelproto.StdinWait
	more  chan struct{}
	asks  chan struct{}
	ended chan struct{}
	done  chan struct{}
}

// NewStdin returns an open stdin for one cell.
func NewStdin() *Stdin {
	return &Stdin{more: make(chan struct{}, 1), asks: make(chan struct{}, 64)}
}

// Write adds input.
func (s *Stdin) Write(p string) {
	s.mu.Lock()
	s.data = append(s.data, p...)
	s.mu.Unlock()
	s.wake()
}

// Close ends the input: once what was written is taken, requests are
// answered with end of file.
func (s *Stdin) Close() {
	s.mu.Lock()
	s.eof = true
	s.mu.Unlock()
	s.wake()
}

// Asked returns how many requests the kernel has sent.
func (s *Stdin) Asked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked
}

// WaitAsked waits until the kernel has sent n requests.
func (s *Stdin) WaitAsked(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for s.Asked() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the kernel sent %d stdin requests in %v, want %d", s.Asked(), timeout, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Stdin) wake() {
	select {
	case s.more <- struct{}{}:
	default:
	}
}

// Start begins serving the requests of cell for k; a cell collector that
// is not ExecInput calls it before sending the Execute, passes each
// message to Handle and calls Stop at Done.
func (s *Stdin) Start(k *Kernel, cell string) { s.start(k, cell) }

// Stop ends serving, at the end of the cell.
func (s *Stdin) Stop() { s.stop() }

func (s *Stdin) start(k *Kernel, cell string) {
	if s == nil {
		return
	}
	s.k, s.cell = k, cell
	s.ended, s.done = make(chan struct{}), make(chan struct{})
	go s.serve()
}

func (s *Stdin) stop() {
	if s == nil {
		return
	}
	close(s.ended)
	<-s.done
}

// Requests returns the kernel's stdin requests so far.
func (s *Stdin) Requests() []kernelproto.StdinRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]kernelproto.StdinRequest(nil), s.reqs...)
}

// Waits returns the kernel's stdin_wait messages so far.
func (s *Stdin) Waits() []kernelproto.StdinWait {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]kernelproto.StdinWait(nil), s.waits...)
}

// Handle takes a stdin request, or notes a stdin_wait (line is the
// message); it says whether the message was either.
func (s *Stdin) Handle(env kernelproto.Envelope, line ...[]byte) bool {
	if s != nil && env.Type == kernelproto.TStdinWait {
		var w kernelproto.StdinWait
		if len(line) > 0 {
			json.Unmarshal(line[0], &w)
		}
		s.mu.Lock()
		s.waits = append(s.waits, w)
		s.mu.Unlock()
		return true
	}
	if s == nil || env.Type != kernelproto.TStdinRequest {
		return false
	}
	var r kernelproto.StdinRequest
	if len(line) > 0 {
		json.Unmarshal(line[0], &r)
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.asked++
	s.mu.Unlock()
	s.asks <- struct{}{}
	return true
}

func (s *Stdin) serve() {
	defer close(s.done)
	for {
		select {
		case <-s.asks:
		case <-s.ended:
			return
		}
		for {
			s.mu.Lock()
			ans := kernelproto.Stdin{Type: kernelproto.TStdin, Cell: s.cell}
			if len(s.data) > 0 {
				n := min(len(s.data), kernelproto.MaxStdinChunk)
				ans.Data = append([]byte(nil), s.data[:n]...)
				s.data = s.data[n:]
			} else {
				ans.EOF = s.eof
			}
			s.mu.Unlock()
			if len(ans.Data) > 0 || ans.EOF {
				b, _ := json.Marshal(ans)
				if _, err := s.k.Conn.Write(append(b, '\n')); err != nil {
					return
				}
				break
			}
			select {
			case <-s.more:
			case <-s.ended:
				return
			}
		}
	}
}
