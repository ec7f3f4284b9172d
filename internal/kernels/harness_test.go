package kernels

import (
	"bufio"
	"bytes"
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

// localKernel runs a kernel directly on the host, without a sandbox, with
// the same descriptors the agent gives it: fd 3 a unix socket, stdout and
// stderr pipes, an empty stdin. Kernel tests use it; the sandboxed path is
// tested through the engine.
type localKernel struct {
	t      testing.TB
	cmd    *exec.Cmd
	ch     net.Conn
	in     *bufio.Reader
	outR   *os.File
	errR   *os.File
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	wg     sync.WaitGroup
	ready  kernelproto.Ready
	next   int
}

// cellResult is what one cell produced.
type cellResult struct {
	Status   string
	Stdout   string
	Stderr   string
	Displays []kernelproto.Display // display and execute_result, in order
	Results  []kernelproto.Display // execute_result only
	Error    *kernelproto.Error
}

// startLocal starts spec in dir (a temp dir if ""), waits for Ready, and
// stops the kernel when the test ends.
func startLocal(t testing.TB, spec Spec, dir string) *localKernel {
	t.Helper()
	if len(spec.Argv) == 0 {
		t.Fatalf("%s kernel has no argv", spec.Language)
	}
	if _, err := os.Stat(spec.Argv[0]); err != nil {
		t.Skipf("%s runtime not installed: %v", spec.Language, err)
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
	k := &localKernel{t: t, ch: ch, in: bufio.NewReaderSize(ch, 1<<20), outR: outR, errR: errR}
	k.cmd = exec.Command(spec.Argv[0], spec.Argv[1:]...)
	k.cmd.Dir = dir
	k.cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8", "TMPDIR=" + os.TempDir()}, spec.Env...)
	k.cmd.Stdout, k.cmd.Stderr = outW, errW
	k.cmd.ExtraFiles = []*os.File{theirs}
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	outW.Close()
	errW.Close()
	k.wg.Add(2)
	go k.pump(outR, &k.stdout)
	go k.pump(errR, &k.stderr)
	t.Cleanup(k.stop)
	line := k.read(30 * time.Second)
	if err := json.Unmarshal(line, &k.ready); err != nil || k.ready.Type != kernelproto.TReady {
		t.Fatalf("first message %q is not ready (%v); stderr: %s", line, err, k.stderrText())
	}
	return k
}

func (k *localKernel) pump(r io.Reader, dst *bytes.Buffer) {
	defer k.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		k.mu.Lock()
		dst.Write(buf[:n])
		k.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (k *localKernel) stderrText() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stderr.String()
}

func (k *localKernel) stop() {
	k.ch.Close()
	if k.cmd.Process != nil {
		syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		k.cmd.Wait()
	}
	k.wg.Wait()
}

// read returns the next line from the kernel, failing the test on timeout.
func (k *localKernel) read(timeout time.Duration) []byte {
	k.t.Helper()
	k.ch.SetReadDeadline(time.Now().Add(timeout))
	line, err := k.in.ReadBytes('\n')
	if err != nil {
		k.t.Fatalf("reading from the kernel: %v; stderr: %s", err, k.stderrText())
	}
	if len(line) > kernelproto.MaxLine {
		k.t.Fatalf("kernel sent a %d-byte line", len(line))
	}
	return line
}

func (k *localKernel) send(msg any) {
	k.t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.ch.Write(append(b, '\n')); err != nil {
		k.t.Fatalf("sending to the kernel: %v", err)
	}
}

func (k *localKernel) cellID() string {
	k.next++
	return fmt.Sprintf("c%d", k.next)
}

// exec runs one cell and collects everything it produced.
func (k *localKernel) exec(code string) cellResult {
	k.t.Helper()
	return k.execWith(kernelproto.Execute{Code: code}, 60*time.Second)
}

// execWith runs a cell with stdin or other fields set.
func (k *localKernel) execWith(req kernelproto.Execute, timeout time.Duration) cellResult {
	k.t.Helper()
	req.Type, req.Cell = kernelproto.TExecute, k.cellID()
	k.mu.Lock()
	outStart, errStart := k.stdout.Len(), k.stderr.Len()
	k.mu.Unlock()
	k.send(req)
	var res cellResult
	for {
		line := k.read(timeout)
		var env kernelproto.Envelope
		if err := json.Unmarshal(line, &env); err != nil {
			k.t.Fatalf("bad message %q: %v", line, err)
		}
		if env.Cell != req.Cell {
			k.t.Fatalf("message for cell %q while %q runs: %s", env.Cell, req.Cell, line)
		}
		switch env.Type {
		case kernelproto.TDisplay, kernelproto.TExecuteResult:
			var d kernelproto.Display
			mustUnmarshal(k.t, line, &d)
			res.Displays = append(res.Displays, d)
			if env.Type == kernelproto.TExecuteResult {
				res.Results = append(res.Results, d)
			}
		case kernelproto.TError:
			res.Error = new(kernelproto.Error)
			mustUnmarshal(k.t, line, res.Error)
		case kernelproto.TDone:
			var d kernelproto.Done
			mustUnmarshal(k.t, line, &d)
			res.Status = d.Status
			k.drain()
			k.mu.Lock()
			res.Stdout = k.stdout.String()[outStart:]
			res.Stderr = k.stderr.String()[errStart:]
			k.mu.Unlock()
			return res
		default:
			k.t.Fatalf("unexpected message during a cell: %s", line)
		}
	}
}

// drain waits until both output pipes are empty, as the agent does after
// Done: the kernel flushed before Done, so what it wrote is in the pipes.
func (k *localKernel) drain() {
	for i := 0; i < 200; i++ {
		if pending(k.outR) == 0 && pending(k.errR) == 0 {
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

// request sends a complete or check message and returns the answer line.
func (k *localKernel) request(msg any) []byte {
	k.t.Helper()
	k.send(msg)
	return k.read(10 * time.Second)
}

// interrupt sends SIGINT to the kernel's process group, as the agent does.
func (k *localKernel) interrupt() {
	syscall.Kill(-k.cmd.Process.Pid, syscall.SIGINT)
}

func mustUnmarshal(t testing.TB, line []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(line, v); err != nil {
		t.Fatalf("bad message %q: %v", line, err)
	}
}

// text returns the text/plain of a display, unquoted.
func text(t testing.TB, d kernelproto.Display) string {
	t.Helper()
	var s string
	if raw, ok := d.Data["text/plain"]; ok {
		mustUnmarshal(t, raw, &s)
	}
	return s
}
