package native

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/cgroups"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// uidsPerSandbox is the size of each sandbox's host uid range: enough for
// every uid a Debian userland uses inside (root, user, nobody at 65534).
const uidsPerSandbox = 65536

// Config is the backend's host-side configuration.
type Config struct {
	RuntimeDir string // default /run/kiln
	UIDBase    uint32 // first host uid of the first range; default 1,200,000,000
	Slots      int    // number of uid ranges, i.e. sandboxes at once; default 4096
	CgroupRoot string // default "kiln"
}

func (c Config) withDefaults() Config {
	if c.RuntimeDir == "" {
		c.RuntimeDir = "/run/kiln"
	}
	if c.UIDBase == 0 {
		c.UIDBase = 1_200_000_000
	}
	if c.Slots == 0 {
		c.Slots = 4096
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = "kiln"
	}
	return c
}

// Backend creates native sandboxes.
type Backend struct {
	cfg      Config
	cg       *cgroups.Host
	landlock bool
	log      *slog.Logger

	made backend.Made[*Sandbox] // by CreateSandbox, until destroyed
}

// New checks that this host can run sandboxes securely and refuses, with
// the reason, when it cannot. It never falls back to weaker isolation.
func New(cfg Config, log *slog.Logger) (*Backend, error) {
	cfg = cfg.withDefaults()
	probe := ProbeHost()
	if err := probe.Verdict(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.RuntimeDir, "stage"), 0o755); err != nil {
		return nil, kiln.Wrap(kiln.Unsupported, err, "cannot create the runtime directory %s", cfg.RuntimeDir)
	}
	// The sandbox's own uid must be able to reach the stage directory.
	for _, d := range []string{cfg.RuntimeDir, filepath.Join(cfg.RuntimeDir, "stage")} {
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, kiln.Wrap(kiln.Unsupported, err, "cannot set up %s", d)
		}
	}
	cgh, err := cgroups.Detect()
	if err != nil {
		return nil, kiln.Wrap(kiln.Unsupported, err, "this host's cgroups cannot limit sandboxes")
	}
	cgh.RootGroup = cfg.CgroupRoot
	b := &Backend{cfg: cfg, cg: cgh, landlock: probe.LandlockABI >= LandlockFull, log: log}
	if n, err := b.CleanOrphans(context.Background()); err != nil {
		log.Warn("cleaning up after earlier sandboxes", "err", err)
	} else if n > 0 {
		log.Info("removed what earlier sandboxes left behind", "sandboxes", n)
	}
	return b, nil
}

// Sandbox is one running native sandbox.
type Sandbox struct {
	ID      string
	Agent   *agentclient.Client
	HostUID uint32 // host uid of the sandbox's root; user code runs as HostUID+UserUID
	InitPID int    // host pid of the sandbox's PID 1

	b     *Backend
	slot  *slot
	live  *os.File
	group *cgroups.Group
	cmd   *exec.Cmd
	conn  *os.File

	destroyOnce sync.Once
	destroyErr  error
}

// Create starts a sandbox and returns once its agent has said hello.
func (b *Backend) Create(ctx context.Context, spec Spec) (_ *Sandbox, err error) {
	if err := spec.Limits.Validate(); err != nil {
		return nil, err
	}
	lim := spec.Limits.WithDefaults()
	if spec.Hostname == "" {
		spec.Hostname = "sandbox"
	}
	if err := validHostname(spec.Hostname); err != nil {
		return nil, err
	}
	for _, dir := range []string{spec.HostDir, spec.BuildCache} {
		if dir != "" {
			if err := checkHostDir(dir); err != nil {
				return nil, err
			}
		}
	}
	if _, err := checkMounts(spec.Mounts); err != nil {
		return nil, err
	}
	s := &Sandbox{ID: newID(), b: b}
	defer func() {
		if err != nil {
			s.Destroy(context.Background())
		}
	}()
	if s.slot, err = b.acquireSlot(); err != nil {
		return nil, kiln.Wrap(kiln.Unavailable, err, "no sandbox slot is free")
	}
	s.HostUID = b.hostUID(s.slot)
	if spec.HostDir != "" {
		uid := int(s.HostUID) + UserUID
		if err := chownTree(spec.HostDir, uid, uid); err != nil {
			return nil, kiln.Wrap(kiln.SandboxError, err, "cannot give the workspace directory to the sandbox's user")
		}
	}
	if spec.EgressSocket != "" {
		if err := giveSocket(spec.EgressSocket, int(s.HostUID)); err != nil {
			return nil, kiln.Wrap(kiln.SandboxError, err, "cannot give the egress socket to the sandbox")
		}
	}
	if s.live, err = b.markLive(s.ID); err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot register the sandbox")
	}
	user := cgroups.Limits{MemoryBytes: lim.MemoryBytes, Pids: lim.Pids, CPUMillis: lim.CPUMillis}
	if s.group, err = b.cg.Create(s.ID, user, cgroups.DefaultAgentLimits()); err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot create the sandbox's cgroup")
	}
	if err := s.start(ctx, spec, lim); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sandbox) start(ctx context.Context, spec Spec, lim kiln.Limits) (err error) {
	handles, err := s.group.OpenHandles()
	if err != nil {
		return kiln.Wrap(kiln.SandboxError, err, "cannot open the sandbox's cgroup")
	}
	defer handles.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return kiln.Wrap(kiln.SandboxError, err, "socketpair")
	}
	s.conn = os.NewFile(uintptr(fds[0]), "agent")
	child := os.NewFile(uintptr(fds[1]), "agent-child")
	defer child.Close() // again below; this one covers early returns
	bootR, bootW, err := os.Pipe()
	if err != nil {
		return kiln.Wrap(kiln.SandboxError, err, "pipe")
	}
	defer bootR.Close()
	defer bootW.Close()

	var stderr bytes.Buffer
	extra := append([]*os.File{bootR, child}, handles.Files()...)
	s.cmd = &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"kiln-init", protocol.BootArg},
		Env:        []string{},
		ExtraFiles: extra,
		Stderr:     &limitedBuffer{buf: &stderr, max: 8 << 10},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
				unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(s.HostUID), Size: uidsPerSandbox}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(s.HostUID), Size: uidsPerSandbox}},
			GidMappingsEnableSetgroups: true,
			// Become uid 0 of the new namespace (host uid HostUID) before the
			// exec; host root itself is not mapped inside at all.
			Credential: &syscall.Credential{Uid: 0, Gid: 0},
			Pdeathsig:  unix.SIGKILL,
			// A session of its own: a terminal's Ctrl-C goes to kiln's
			// foreground process group, never to the sandbox's PID 1.
			Setsid: true,
		},
	}
	if err := s.cmd.Start(); err != nil {
		return kiln.Wrap(kiln.SandboxError, err, "cannot start the sandbox")
	}
	s.InitPID = s.cmd.Process.Pid
	// Only the child may hold its ends now, so that its death is an EOF here.
	child.Close()
	bootR.Close()
	boot, err := s.bootConfig(spec, lim, handles)
	if err != nil {
		return err
	}
	if _, err := bootW.Write(boot); err != nil {
		return kiln.Wrap(kiln.SandboxError, err, "cannot configure the sandbox")
	}
	bootW.Close()
	// Moving PID 1 into the agent cgroup waits for an RCU grace period on
	// cgroup v1, so it runs alongside the boot rather than before it. User
	// code never runs in the agent's group, so nothing depends on the order.
	added := make(chan error, 1)
	go func() { added <- s.group.AddAgent(s.InitPID) }()
	defer func() {
		if e := <-added; e != nil && err == nil {
			err = kiln.Wrap(kiln.SandboxError, e, "cannot place the sandbox in its cgroup")
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if s.Agent, err = agentclient.Dial(dctx, s.conn); err != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		msg := bytes.TrimSpace(stderr.Bytes())
		return kiln.Wrap(kiln.SandboxError, fmt.Errorf("%w; sandbox said: %s", err, msg), "the sandbox failed to start")
	}
	return nil
}

func (s *Sandbox) bootConfig(spec Spec, lim kiln.Limits, h *cgroups.Handles) ([]byte, error) {
	nfiles := len(h.Files())
	cgSpec, err := json.Marshal(h.Spec(protocol.FirstCgrFD))
	if err != nil {
		return nil, err
	}
	keep := make([]int, nfiles)
	for i := range keep {
		keep[i] = protocol.FirstCgrFD + i
	}
	env := append([]string{}, BaseEnv...)
	egressIn := ""
	if spec.EgressSocket != "" {
		env = append(env, protocol.EgressEnv...)
		egressIn = protocol.EgressSocketPath
	}
	env = append(env, spec.Env...)
	mounts, err := checkMounts(spec.Mounts)
	if err != nil {
		return nil, err
	}
	return json.Marshal(protocol.Boot{
		Mounts:       mounts,
		Hostname:     spec.Hostname,
		StageDir:     filepath.Join(s.b.cfg.RuntimeDir, "stage"),
		ROBinds:      roBinds,
		EtcBinds:     etcBinds,
		EtcFiles:     etcFiles(spec.Hostname),
		Workspace:    Workspace,
		HostDir:      spec.HostDir,
		UserUID:      UserUID,
		TmpBytes:     lim.TmpBytes,
		ShmBytes:     min(lim.TmpBytes, 64*kiln.MiB),
		WorkBytes:    lim.WorkspaceBytes,
		Inodes:       lim.Inodes,
		EgressSocket: spec.EgressSocket,
		BuildCache:   spec.BuildCache,
		Agent: protocol.AgentConfig{
			ConnFD:    protocol.ConnFD,
			Cgroup:    cgSpec,
			KeepFDs:   keep,
			Workspace: Workspace,
			UserUID:   UserUID,
			Env:       env,
			OpenFiles: lim.OpenFiles,
			FileSize:  lim.FileSizeBytes,
			Landlock:  s.b.landlock,
			Egress:    egressIn,
		},
	})
}

// Destroy kills everything in the sandbox and removes every trace of it on
// the host. It is safe to call more than once.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.destroyOnce.Do(func() { s.destroyErr = s.destroy(ctx) })
	return s.destroyErr
}

func (s *Sandbox) destroy(ctx context.Context) error {
	var errs []error
	if s.Agent != nil {
		s.Agent.Close()
	} else if s.conn != nil {
		s.conn.Close()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		// Killing PID 1 makes the kernel kill every process of the pid
		// namespace; Wait returns once they are all gone.
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
	if s.group != nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := s.group.Destroy(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.live != nil && len(errs) == 0 {
		s.b.unmarkLive(s.ID, s.live)
	}
	if s.slot != nil {
		s.slot.release()
	}
	if len(errs) > 0 {
		return kiln.Wrap(kiln.SandboxError, errs[0], "sandbox %s was not fully removed", s.ID)
	}
	return nil
}

// giveSocket makes the unix socket at path the sandbox root's alone: only
// the agent (uid 0 inside) may connect to it, not user code (uid 1000).
func giveSocket(path string, uid int) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s is not a unix socket", path)
	}
	if err := os.Lchown(path, uid, uid); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// limitedBuffer keeps the first max bytes written to it and drops the rest,
// so a misbehaving child cannot grow the service's memory.
type limitedBuffer struct {
	mu  sync.Mutex
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
