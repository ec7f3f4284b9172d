package docker

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"

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
// comes on stdin and goes out on stdout; the agent serves a socket, so
// two copies join them.
func runAgent(config string) int {
	if os.Getpid() == 1 {
		return initProcess()
	}
	reserveThreads(spareThreads)
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

// initProcess is PID 1 of the container: it starts the agent as its
// child and reaps until the agent exits. The agent must not be PID 1
// itself: in its unisolated mode it finds what to kill by walking parent
// pids up to itself, a walk that stops at PID 1. As the subreaper of its
// descendants the agent gets their orphans; PID 1 sees only the agent.
func initProcess() int {
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "kiln container init: %v\n", err)
		return 1
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 1
		}
		if pid == cmd.Process.Pid {
			if ws.Exited() {
				return ws.ExitStatus()
			}
			return 128 + int(ws.Signal())
		}
	}
}
