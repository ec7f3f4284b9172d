package docker

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent"
)

func init() {
	if len(os.Args) == 3 && os.Args[1] == AgentArg {
		os.Exit(runAgent(os.Args[2]))
	}
}

// runAgent is the container's PID 1. The container already is what the
// native boot builds (a root of its own, read-only, no network, a
// non-root user without capabilities, cgroup limits), so there is no
// pivot_root, no mounts and no spawn stage: the agent serves in its
// unisolated mode, with the container as the isolation. The protocol
// comes over the socket the service bound in (or on stdin and stdout:
// the agent serves a socket, so two copies join them).
//
// The agent runs as the user's uid (the container has one non-root user
// and no capabilities), so it must be out of user code's reach by other
// means than a uid (protectPID1).
func runAgent(config string) int {
	PrepareAgent()
	var cfg agent.Unisolated
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "kiln container agent: %v\n", err)
		return 1
	}
	if conn, err := dialHost(); err != nil || conn != nil {
		return serveHost(conn, err, cfg)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kiln container agent: socketpair: %v\n", err)
		return 1
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "pump"), os.NewFile(uintptr(fds[1]), "agent")
	// stdin and stdout must not reach user processes either.
	unix.CloseOnExec(0)
	unix.CloseOnExec(1)
	go func() {
		io.Copy(ours, os.Stdin)
		unix.Shutdown(fds[0], unix.SHUT_WR) // the service hung up
	}()
	go io.Copy(os.Stdout, ours)
	if err := agent.ServeUnisolated(theirs, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "kiln container agent: %v\n", err)
		return 1
	}
	return 0
}

// PrepareAgent readies a container's agent, before it serves: out of
// user code's reach when it is PID 1 (protectPID1), with its spare
// threads made (reserveThreads). The Kubernetes backend's Pod agent is
// one too.
func PrepareAgent() {
	if os.Getpid() == 1 {
		protectPID1()
	}
	reserveThreads(spareThreads)
}

// protectPID1 puts the agent, the container's PID 1, out of reach of
// user code that runs as the same uid:
//   - kill(-1) skips a pid namespace's init, and the kernel drops SIGKILL
//     and SIGSTOP sent to it from inside its namespace;
//   - every other signal is caught and dropped here (a signal to an init
//     from inside is delivered only when it has a handler, and the Go
//     runtime's handlers would end the process on SIGTERM or SIGHUP).
//     Handlers, unlike ignored signals, go back to the default at exec, so
//     user programs get their usual dispositions;
//   - not dumpable: its /proc entries (environ, fd, mem, maps, root, cwd,
//     exe) belong to root, and ptrace, process_vm_readv and pidfd_getfd
//     are refused (EPERM/EACCES).
func protectPID1() {
	sig := make(chan os.Signal, 64)
	signal.Notify(sig)
	go func() {
		for range sig {
		}
	}()
	// The agent writes its own oom_score_adj around each fork
	// (agent.withUserOOMScore), a file that becomes root's below.
	if err := agent.HoldOOMScoreFile(); err != nil {
		fmt.Fprintf(os.Stderr, "kiln container agent: oom_score_adj: %v\n", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "kiln container agent: not dumpable: %v\n", err)
	}
}
