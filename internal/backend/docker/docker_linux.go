package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Labels on everything the backend makes; List and reaping look for them
// and touch nothing else on the engine.
const (
	labelBackend = "dev.kiln.backend"
	labelSandbox = "dev.kiln.sandbox"
	labelOwner   = "dev.kiln.owner"
)

// Backend makes sandboxes as containers of one image.
type Backend struct {
	cli   *client.Client
	image string // empty until SetImage or BuildImage
	owner string // when set, labels what this backend makes, and List sees only that
	mu    sync.Mutex
	conns map[string]*agentclient.Client

	runtime string // the OCI runtime of new containers (SetRuntime); empty: the engine's default

	sockOnce sync.Once // socketDir
	sockDir  string
	sockErr  error
}

// New connects to the engine named by the environment (DOCKER_HOST, else
// its default socket) and checks that it answers.
func New(ctx context.Context) (*Backend, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot make a Docker client")
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, kiln.Wrap(kiln.SandboxError, err, "no Docker engine answers (is dockerd running, and is its socket reachable?)")
	}
	return &Backend{cli: cli, conns: map[string]*agentclient.Client{}}, nil
}

// SetImage chooses the environment image of new sandboxes.
func (b *Backend) SetImage(ref string) { b.image = ref }

// SetOwner names the kiln that makes sandboxes (kiln serve: its data
// directory), so that two kilns on one engine never list, and so never
// reap, each other's containers. Call it before the first CreateSandbox.
func (b *Backend) SetOwner(owner string) { b.owner = owner }

// Reap destroys every sandbox List finds: at the start of kiln serve,
// those a crashed kiln of the same owner left (stopped containers, whose
// agent lost its stream, and their volumes). It returns how many.
func (b *Backend) Reap(ctx context.Context) (int, error) {
	ids, err := b.List(ctx)
	if err != nil {
		return 0, err
	}
	for i, id := range ids {
		if err := b.DestroySandbox(ctx, id); err != nil {
			return i, err
		}
	}
	return len(ids), nil
}

// labels are the labels of a sandbox's container and volume.
func (b *Backend) labels(id string) map[string]string {
	l := map[string]string{labelBackend: "docker", labelSandbox: id}
	if b.owner != "" {
		l[labelOwner] = b.owner
	}
	return l
}

// Close closes the engine's client.
func (b *Backend) Close() error { return b.cli.Close() }

// CreateSandbox creates and starts a container and returns once its
// agent, connected to the socket the service binds into it, answers.
func (b *Backend) CreateSandbox(ctx context.Context, spec backend.Spec) (_ backend.Sandbox, err error) {
	if b.image == "" {
		return backend.Sandbox{}, kiln.Errorf(kiln.SandboxError, "the Docker backend has no image: run kiln image build")
	}
	if err := spec.Limits.Validate(); err != nil {
		return backend.Sandbox{}, err
	}
	lim := spec.Limits.WithDefaults()
	id := newID()
	env := baseEnv()
	unisolated := agent.Unisolated{Workspace: "/workspace", OpenFiles: lim.OpenFiles, FileSize: lim.FileSizeBytes}
	var egress []mount.Mount
	if spec.EgressSocket != "" {
		// The agent and user code are one uid in a container, so user
		// code could use the socket itself: it meets the same proxy.
		if err := os.Lchown(spec.EgressSocket, UID, UID); err != nil {
			return backend.Sandbox{}, kiln.Wrap(kiln.SandboxError, err, "cannot give the egress socket to the sandbox's user")
		}
		env = append(env, protocol.EgressEnv...)
		unisolated.Egress = protocol.EgressSocketPath
		egress = append(egress, mount.Mount{Type: mount.TypeBind, Source: spec.EgressSocket, Target: protocol.EgressSocketPath})
	}
	unisolated.Env = append(env, spec.Env...)
	cfg, _ := json.Marshal(unisolated)
	tmpfs := map[string]string{
		"/tmp":     fmt.Sprintf("rw,nosuid,nodev,exec,size=%d,nr_inodes=%d,mode=1777", lim.TmpBytes, lim.Inodes), // exec: the engine's default is noexec, and compiled languages run from /tmp/.kiln, as natively
		"/dev/shm": fmt.Sprintf("rw,nosuid,nodev,noexec,size=%d", lim.TmpBytes),
	}
	var ws []mount.Mount
	if spec.HostDir == "" {
		// As natively: a size- and inode-limited tmpfs of the user's
		// (a volume has no size limit, and costs its creation and removal).
		tmpfs["/workspace"] = workspaceTmpfs(lim)
	} else {
		// The service's workspace outlives the container; the container's
		// user must own it (the directory only: its files were made by the
		// same uid).
		if err := os.Lchown(spec.HostDir, UID, UID); err != nil {
			return backend.Sandbox{}, kiln.Wrap(kiln.SandboxError, err, "cannot give the workspace to the sandbox's user")
		}
		ws = []mount.Mount{{Type: mount.TypeBind, Source: spec.HostDir, Target: "/workspace"}}
	}
	ln, agentMount, err := b.listenAgent(id)
	if err != nil {
		return backend.Sandbox{}, err
	}
	defer ln.Close()
	usr, err := b.usrMount(id)
	if err != nil {
		return backend.Sandbox{}, kiln.Wrap(kiln.SandboxError, err, "cannot make the container's /usr")
	}
	mounts := append([]mount.Mount{usr, agentMount}, ws...)
	mounts = append(mounts, egress...)
	for _, m := range spec.Mounts { // checked by the caller (native.ResolveMount)
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: true})
	}
	pids := lim.Pids + agentPids // the agent's threads (threads_linux.go)
	profile, err := dockerProfile()
	if err != nil {
		return backend.Sandbox{}, kiln.Wrap(kiln.Internal, err, "cannot make the seccomp profile")
	}
	created, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:  "kiln-" + id,
		Image: b.image,
		Config: &container.Config{
			Cmd:        []string{AgentArg, string(cfg)},
			User:       fmt.Sprintf("%d:%d", UID, UID),
			WorkingDir: "/workspace",
			Hostname:   "kiln",
			Env:        []string{},
			Labels:     b.labels(id),
		},
		HostConfig: &container.HostConfig{
			Runtime:        b.runtime,
			NetworkMode:    "none",
			MaskedPaths:    maskedPaths,
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges", "seccomp=" + string(profile)},
			Tmpfs:          tmpfs,
			Mounts:         mounts,
			LogConfig:      agentLogConfig,
			Resources: container.Resources{
				Memory:     lim.MemoryBytes,
				MemorySwap: lim.MemoryBytes, // swap off
				PidsLimit:  &pids,
				NanoCPUs:   lim.CPUMillis * 1_000_000,
			},
		},
	})
	if err != nil {
		return backend.Sandbox{}, kiln.Wrap(kiln.SandboxError, err, "cannot create the container")
	}
	defer func() {
		if err != nil {
			b.remove(context.Background(), created.ID)
		}
	}()
	conn, err := b.startAgent(ctx, created.ID, ln)
	if err != nil {
		return backend.Sandbox{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := agentclient.Dial(dctx, conn)
	if err != nil {
		conn.Close()
		return backend.Sandbox{}, kiln.Wrap(kiln.SandboxError, fmt.Errorf("%w; agent said: %s", err, b.agentLog(created.ID)), "the agent failed to start")
	}
	b.mu.Lock()
	b.conns[id] = c
	b.mu.Unlock()
	return backend.Sandbox{ID: id}, nil
}

// baseEnv is native.BaseEnv: the same paths inside.
func baseEnv() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin",
		"HOME=/workspace",
		"USER=user",
		"LOGNAME=user",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"TMPDIR=/tmp",
		"XDG_CACHE_HOME=/tmp/.cache",
		"TERM=dumb",
		"SHELL=/bin/bash",
	}
}

// Connect returns the client of the sandbox's agent. The agent accepts
// one connection, made by CreateSandbox (agent_socket_linux.go), so a
// sandbox has one client.
func (b *Backend) Connect(ctx context.Context, id string) (*agentclient.Client, error) {
	b.mu.Lock()
	c := b.conns[id]
	b.mu.Unlock()
	if c == nil {
		return nil, kiln.Errorf(kiln.NotFound, "no sandbox %q", id)
	}
	return c, nil
}

// DestroySandbox removes the container with its workspace volume (a
// HostDir workspace stays); one that is gone is not an error.
func (b *Backend) DestroySandbox(ctx context.Context, id string) error {
	b.mu.Lock()
	c := b.conns[id]
	delete(b.conns, id)
	b.mu.Unlock()
	if c != nil {
		c.Close()
	}
	return b.remove(ctx, "kiln-"+id)
}

func (b *Backend) remove(ctx context.Context, name string) error {
	_, err := b.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return kiln.Wrap(kiln.SandboxError, err, "cannot remove the container")
	}
	return nil
}

// List returns the sandboxes whose containers exist, found by label, also
// those of a kiln that crashed; with an owner set, only that owner's.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	f := make(client.Filters).Add("label", labelBackend+"=docker")
	if b.owner != "" {
		f.Add("label", labelOwner+"="+b.owner)
	}
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot list containers")
	}
	var ids []string
	for _, c := range res.Items {
		if id := c.Labels[labelSandbox]; id != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Capabilities: isolation by the container. Limits are enforced by the
// container's cgroup but not yet reported per execution (the agent runs
// in container mode without cgroup handles), so Limits is false.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Name: "docker", Isolation: true}
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// limitedBuffer keeps the first 8 KiB written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 8<<10 - len(l.buf); room > 0 {
		l.buf = append(l.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
