package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/seccomp"
)

// The agent's protocol goes over a unix socket, not the container's
// attach stream: the service listens on a socket file of its own, binds
// that file into the container at agentSocketPath, and the agent
// connects to it as it starts. The engine is then out of the data path
// (an attach stream is copied by dockerd and the shim, and by two pumps
// in the agent, on every frame), and a sandbox needs no attach call.
// The service accepts one connection, from the container's uid, then
// closes the listener, which removes the file: nothing user code starts
// later can connect to it.
const agentSocketPath = "/run/kiln/agent.sock"

// socketDir is where the host's agent sockets are made: under /run/kiln
// (kiln's runtime directory, where the native backend keeps its slots),
// else the temporary directory, 0700 root either way.
func (b *Backend) socketDir() (string, error) {
	b.sockOnce.Do(func() {
		for _, dir := range []string{"/run/kiln/docker", filepath.Join(os.TempDir(), "kiln-docker")} {
			// The parent as the native backend makes it (0755: its
			// sandboxes' uids pass through /run/kiln), this one 0700.
			if b.sockErr = os.MkdirAll(filepath.Dir(dir), 0o755); b.sockErr != nil {
				continue
			}
			if b.sockErr = os.Mkdir(dir, 0o700); b.sockErr != nil && !errors.Is(b.sockErr, fs.ErrExist) {
				continue
			}
			// Only a directory of this user's that nobody else can write
			// (one found in /tmp might be anyone's).
			if !ownDir(dir) {
				b.sockErr = fmt.Errorf("%s is not this user's own 0700 directory", dir)
				continue
			}
			b.sockDir, b.sockErr = dir, nil
			return
		}
	})
	return b.sockDir, b.sockErr
}

// listenAgent listens for sandbox id's agent and returns the mount that
// puts the socket in its container.
func (b *Backend) listenAgent(id string) (*net.UnixListener, mount.Mount, error) {
	dir, err := b.socketDir()
	if err != nil {
		return nil, mount.Mount{}, kiln.Wrap(kiln.SandboxError, err, "cannot make the directory of the agents' sockets")
	}
	path := filepath.Join(dir, id+".sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, mount.Mount{}, kiln.Wrap(kiln.SandboxError, err, "cannot listen for the agent")
	}
	ln.SetUnlinkOnClose(true)
	// Only the container's user may connect (0600 is the default for a
	// root-made socket only under a restrictive umask: set it).
	if err := errors.Join(os.Chown(path, UID, UID), os.Chmod(path, 0o600)); err != nil {
		ln.Close()
		return nil, mount.Mount{}, kiln.Wrap(kiln.SandboxError, err, "cannot give the agent's socket to the sandbox's user")
	}
	// Read-only: connecting needs no write access to a socket's mount,
	// and nothing in the container may replace or change the file.
	return ln, mount.Mount{Type: mount.TypeBind, Source: path, Target: agentSocketPath, ReadOnly: true}, nil
}

// startAgent starts the created container and returns the agent's
// connection. If the container stops before its agent connects, it
// fails at once with what the agent wrote to stderr.
func (b *Backend) startAgent(ctx context.Context, containerID string, ln *net.UnixListener) (*net.UnixConn, error) {
	defer ln.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Registered before the start, as docker run does, so that an exit
	// right after it is seen.
	wait := b.cli.ContainerWait(wctx, containerID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := b.cli.ContainerStart(ctx, containerID, client.ContainerStartOptions{}); err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot start the container")
	}
	exited := make(chan struct{})
	go func() {
		select {
		case <-wait.Result:
			close(exited)
		case <-wait.Error: // the wait ended (cancelled, or the engine went): only the deadline is left
			return
		}
		ln.SetDeadline(time.Now())
	}()
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ln.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { ln.SetDeadline(time.Now()) })
	defer stop()
	conn, err := ln.AcceptUnix()
	if err != nil {
		select {
		case <-exited:
			err = errors.New("the container stopped before its agent connected")
		default:
		}
		return nil, kiln.Wrap(kiln.SandboxError, fmt.Errorf("%w; agent said: %s", err, b.agentLog(containerID)), "the agent failed to start")
	}
	if err := checkPeer(conn); err != nil {
		conn.Close()
		return nil, kiln.Wrap(kiln.SandboxError, err, "the agent failed to start")
	}
	return conn, nil
}

// PeerCred is the credentials of the process that connected conn
// (SO_PEERCRED).
func PeerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	return cred, cerr
}

// checkPeer makes sure the connection comes from the container's user.
func checkPeer(conn *net.UnixConn) error {
	cred, err := PeerCred(conn)
	if err != nil {
		return err
	}
	if cred.Uid != UID {
		return fmt.Errorf("the agent's socket was connected by uid %d, not the sandbox's", cred.Uid)
	}
	return nil
}

// agentLog is the start of what the container wrote (the agent's
// stderr), for an error message.
func (b *Backend) agentLog(containerID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := b.cli.ContainerLogs(ctx, containerID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer rc.Close()
	var out limitedBuffer
	stdcopy.StdCopy(&out, &out, rc)
	return out.String()
}

// dialHost is the container side: the connection to the service's
// socket, or nil when none is bound (the Kubernetes backend's Pods speak
// the protocol on the agent's stdin and stdout).
func dialHost() (*os.File, error) {
	fi, err := os.Lstat(agentSocketPath)
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return nil, nil
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: agentSocketPath}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connect %s: %w", agentSocketPath, err)
	}
	return os.NewFile(uintptr(fd), "service"), nil
}

// agentLogConfig bounds what the engine keeps of a container's output:
// only the agent writes there (user code's output goes through the
// agent), but user code runs as the agent's uid and could write to the
// agent's stderr, so the log is bounded, not left to the daemon's default.
var agentLogConfig = container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}}

// workspaceTmpfs is the options of a /workspace tmpfs: the limits'
// size and inodes, owned by the container's user, executables allowed
// (Docker's default for a tmpfs is noexec), as a volume or a native
// sandbox's workspace allows them.
func workspaceTmpfs(lim kiln.Limits) string {
	return fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d", lim.WorkspaceBytes, lim.Inodes, UID, UID)
}

// dockerProfile is kiln's seccomp profile, made once: it depends only on
// the policy table.
var dockerProfile = sync.OnceValues(seccomp.Docker)

// serveHost serves the protocol on the service's socket (dialHost's
// conn, or its error).
func serveHost(conn *os.File, err error, cfg agent.Unisolated) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "kiln container agent: %v\n", err)
		return 1
	}
	// stdin and stdout must not reach user processes either.
	unix.CloseOnExec(0)
	unix.CloseOnExec(1)
	if err := agent.ServeUnisolated(conn, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "kiln container agent: %v\n", err)
		return 1
	}
	return 0
}
