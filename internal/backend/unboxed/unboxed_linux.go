package unboxed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// agentArg is argv[1] of the agent's process.
const agentArg = "__kiln-unboxed-agent"

func init() {
	if len(os.Args) == 3 && os.Args[1] == agentArg {
		os.Exit(runAgent(os.Args[2]))
	}
}

// runAgent is the child: the agent on fd 3 until the backend hangs up.
func runAgent(config string) int {
	var cfg agent.Unisolated
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "kiln unboxed agent: %v\n", err)
		return 1
	}
	if err := agent.ServeUnisolated(os.NewFile(3, "conn"), cfg); err != nil {
		fmt.Fprintf(os.Stderr, "kiln unboxed agent: %v\n", err)
		return 1
	}
	return 0
}

// Backend makes unboxed sandboxes under a directory.
type Backend struct {
	dir  string
	made backend.Made[*box]
}

// New returns a backend whose sandboxes live under dir (the system's
// temporary directory if empty). A test passes t.TempDir().
func New(dir string) *Backend {
	return &Backend{dir: dir}
}

type box struct {
	root    string // the sandbox's own directory: workspace (unless HostDir) and tmp
	cmd     *exec.Cmd
	client  *agentclient.Client
	once    sync.Once
	destErr error
}

// CreateSandbox starts an agent on a fresh directory.
func (b *Backend) CreateSandbox(ctx context.Context, spec backend.Spec) (_ backend.Sandbox, err error) {
	if err := spec.Limits.Validate(); err != nil {
		return backend.Sandbox{}, err
	}
	root, err := os.MkdirTemp(b.dir, "kiln-unboxed-")
	if err != nil {
		return backend.Sandbox{}, kiln.Wrap(kiln.SandboxError, err, "cannot make the sandbox's directory")
	}
	bx := &box{root: root}
	defer func() {
		if err != nil {
			bx.destroy(context.Background())
		}
	}()
	ws, tmp := filepath.Join(root, "workspace"), filepath.Join(root, "tmp")
	if spec.HostDir != "" {
		ws = spec.HostDir
	} else if err := os.Mkdir(ws, 0o755); err != nil {
		return backend.Sandbox{}, kiln.Wrap(kiln.SandboxError, err, "cannot make the workspace")
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return backend.Sandbox{}, kiln.Wrap(kiln.SandboxError, err, "cannot make the sandbox's tmp")
	}
	cfg, _ := json.Marshal(agent.Unisolated{Workspace: ws, Env: append(baseEnv(ws, tmp), spec.Env...)})
	if err := bx.start(ctx, cfg); err != nil {
		return backend.Sandbox{}, err
	}
	id := newID()
	b.made.Add(id, bx)
	return backend.Sandbox{ID: id, Workspace: ws, BuildArea: filepath.Join(tmp, ".kiln")}, nil
}

// baseEnv is native.BaseEnv with the sandbox's own directories.
func baseEnv(ws, tmp string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin",
		"HOME=" + ws,
		"USER=user",
		"LOGNAME=user",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"TMPDIR=" + tmp,
		"XDG_CACHE_HOME=" + filepath.Join(tmp, ".cache"),
		"TERM=dumb",
		"SHELL=/bin/bash",
	}
}

func (bx *box) start(ctx context.Context, cfg []byte) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return kiln.Wrap(kiln.SandboxError, err, "socketpair")
	}
	// Our end non-blocking, so that it is pollable and Close stops a
	// blocked read: that is how the agent learns it is destroyed.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return kiln.Wrap(kiln.SandboxError, err, "socketpair")
	}
	conn, child := os.NewFile(uintptr(fds[0]), "agent"), os.NewFile(uintptr(fds[1]), "agent-child")
	defer child.Close()
	var stderr bytes.Buffer
	bx.cmd = exec.Command("/proc/self/exe", agentArg, string(cfg))
	bx.cmd.Env = []string{}
	bx.cmd.ExtraFiles = []*os.File{child}
	bx.cmd.Stderr = &limitedWriter{buf: &stderr, max: 8 << 10}
	// A session of its own, away from a terminal's Ctrl-C; killed with
	// the test if the test dies.
	bx.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: unix.SIGKILL}
	if err := bx.cmd.Start(); err != nil {
		conn.Close()
		return kiln.Wrap(kiln.SandboxError, err, "cannot start the agent")
	}
	child.Close()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if bx.client, err = agentclient.Dial(dctx, conn); err != nil {
		conn.Close()
		bx.cmd.Process.Kill()
		bx.cmd.Wait()
		return kiln.Wrap(kiln.SandboxError, fmt.Errorf("%w; agent said: %s", err, bytes.TrimSpace(stderr.Bytes())), "the agent failed to start")
	}
	return nil
}

// Connect returns the client of the sandbox's agent.
func (b *Backend) Connect(ctx context.Context, id string) (*agentclient.Client, error) {
	bx, err := b.made.Get(id)
	if err != nil {
		return nil, err
	}
	return bx.client, nil
}

// DestroySandbox stops the agent, which kills every process it started,
// and removes the sandbox's directory (a HostDir workspace stays).
func (b *Backend) DestroySandbox(ctx context.Context, id string) error {
	return b.made.Destroy(id, func(bx *box) error { return bx.destroy(ctx) })
}

func (bx *box) destroy(ctx context.Context) error {
	bx.once.Do(func() {
		if bx.client != nil {
			bx.client.Close() // the agent kills its descendants and exits
		}
		if bx.cmd != nil && bx.cmd.Process != nil {
			exited := make(chan struct{})
			go func() { bx.cmd.Wait(); close(exited) }()
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				bx.cmd.Process.Kill()
				<-exited
			}
		}
		if err := os.RemoveAll(bx.root); err != nil {
			bx.destErr = kiln.Wrap(kiln.SandboxError, err, "cannot remove the sandbox's directory")
		}
	})
	return bx.destErr
}

// List returns the sandboxes made and not yet destroyed.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	return b.made.List(), nil
}

// Capabilities: none. The agent's time and output limits hold; nothing
// else does.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Name: "unboxed"}
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// limitedWriter keeps the first max bytes written to it.
type limitedWriter struct {
	mu  sync.Mutex
	buf *bytes.Buffer
	max int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
