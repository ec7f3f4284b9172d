package programs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// hostExecer runs programs directly on the host, in a directory that plays
// the workspace, with os/exec: the same argv as in the sandbox, without the
// sandbox. The suite runs every case both ways and compares them, as gVisor
// runs its tests natively and sandboxed. It bounds time and output like the
// agent, but nothing else.
type hostExecer struct {
	root string // the workspace
	tmp  string // TMPDIR
}

var _ Execer = (*hostExecer)(nil)

func (h *hostExecer) WorkspaceDir() string { return h.root }

// BuildArea is in TMPDIR, as the sandbox's is in its /tmp.
func (h *hostExecer) BuildArea() string { return filepath.Join(h.tmp, ".kiln") }

func (h *hostExecer) Exec(ctx context.Context, req protocol.Exec, stdout, stderr io.Writer) (protocol.ExitInfo, error) {
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Dir = filepath.Join(h.root, req.Dir)
	cmd.Env = append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + h.root, "USER=user", "LOGNAME=user",
		"LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TMPDIR=" + h.tmp, "TERM=dumb", "SHELL=/bin/bash",
	}, req.Env...)
	cmd.Stdin = bytes.NewReader(req.Stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &hostOutput{limit: req.OutputBytes}
	cmd.Stdout, cmd.Stderr = out.to(stdout), out.to(stderr)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return protocol.ExitInfo{}, err
	}
	kill := func() { unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	out.kill = kill
	var info protocol.ExitInfo
	var timedOut, canceled bool
	var mu sync.Mutex
	timer := time.AfterFunc(time.Duration(req.TimeoutMs)*time.Millisecond, func() {
		mu.Lock()
		timedOut = true
		mu.Unlock()
		kill()
	})
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		canceled = true
		mu.Unlock()
		kill()
	})
	err := cmd.Wait()
	timer.Stop()
	stop()
	kill() // what the program left behind
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return info, err
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	info.Code = ws.ExitStatus()
	if ws.Signaled() {
		info.Signal = unix.SignalName(ws.Signal())
	}
	info.WallNs = time.Since(start).Nanoseconds()
	info.CPUNs = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Nanoseconds()
	mu.Lock()
	info.TimedOut, info.Canceled = timedOut, canceled
	mu.Unlock()
	info.OutputBytes, info.OutputTruncated = out.result()
	return info, nil
}

// hostOutput counts stdout and stderr together and kills the program when
// they pass the limit, keeping only what fits.
type hostOutput struct {
	mu        sync.Mutex
	limit     int64
	n         int64
	truncated bool
	kill      func()
}

type hostStream struct {
	o *hostOutput
	w io.Writer
}

func (o *hostOutput) to(w io.Writer) io.Writer { return hostStream{o, w} }

func (s hostStream) Write(p []byte) (int, error) {
	o := s.o
	o.mu.Lock()
	defer o.mu.Unlock()
	room := o.limit - o.n
	if int64(len(p)) > room {
		o.truncated = true
		p = p[:max(room, 0)]
		defer o.kill()
	}
	o.n += int64(len(p))
	if s.w != nil {
		s.w.Write(p)
	}
	return len(p), nil
}

func (o *hostOutput) result() (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n, o.truncated
}

func (h *hostExecer) open() (*os.Root, error) { return os.OpenRoot(h.root) }

func (h *hostExecer) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	r, err := h.open()
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	return r.WriteFile(path, data, fs.FileMode(mode))
}

func (h *hostExecer) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	r, err := h.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

func info(name string, fi fs.FileInfo) protocol.FileInfo {
	t := "other"
	switch {
	case fi.Mode().IsRegular():
		t = "file"
	case fi.IsDir():
		t = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		t = "symlink"
	}
	return protocol.FileInfo{Name: name, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), Type: t, ModTime: fi.ModTime().UnixNano()}
}

func (h *hostExecer) Stat(ctx context.Context, path string) (protocol.FileInfo, error) {
	r, err := h.open()
	if err != nil {
		return protocol.FileInfo{}, err
	}
	defer r.Close()
	fi, err := r.Lstat(path)
	if err != nil {
		return protocol.FileInfo{}, err
	}
	return info(filepath.Base(path), fi), nil
}

func (h *hostExecer) List(ctx context.Context, path string) ([]protocol.FileInfo, error) {
	r, err := h.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []protocol.FileInfo
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			out = append(out, info(e.Name(), fi))
		}
	}
	return out, nil
}

func (h *hostExecer) Mkdir(ctx context.Context, path string) error {
	r, err := h.open()
	if err != nil {
		return err
	}
	defer r.Close()
	return r.MkdirAll(path, 0o755)
}

func (h *hostExecer) Delete(ctx context.Context, path string, recursive bool) error {
	r, err := h.open()
	if err != nil {
		return err
	}
	defer r.Close()
	if recursive {
		return r.RemoveAll(path)
	}
	return r.Remove(path)
}
