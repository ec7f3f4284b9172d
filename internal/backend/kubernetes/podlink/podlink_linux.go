package podlink

import (
	"io"
	"os"
	"syscall"
	"time"

	"github.com/kiln-dev/kiln/internal/osthreads"
)

// Only packages that Go initializes first: os/signal or net here would
// have the init of most of the binary's packages come first (Go takes
// the lexically first ready package, and "net" sorts after "k8s.io").

// spareThreads are made at each start (osthreads): the Pod's pids limit
// holds the link container too, and a fork bomb in the sandbox container
// can take every pid; a runtime that then needs a thread aborts, and a
// bridge or the lifeline that ends cuts kiln off the sandbox. Every fd
// is also the runtime poller's, so that no goroutine holds a thread
// while it waits.
const spareThreads = 4

func init() {
	switch {
	case len(os.Args) == 2 && os.Args[1] == BridgeArg:
		osthreads.Reserve(spareThreads)
		os.Exit(runBridge())
	case len(os.Args) == 2 && os.Args[1] == LinkArg:
		osthreads.Reserve(spareThreads)
		os.Exit(runLink())
	}
}

// runLink is the link container's PID 1: the bridges come later, by
// exec, and end up here if orphaned, so it reaps; it holds the lifeline
// to the agent. It ends on SIGTERM (the Pod's deletion) without a
// handler of its own: Go's runtime has one for SIGTERM in every
// program, so the kernel delivers it to a PID 1 too, and without
// os/signal's Notify the runtime ends the program.
func runLink() int {
	go func() {
		// The agent may not listen yet; once connected, the lifeline
		// stays open until this process ends.
		for {
			if c, err := dial(LifelineSocket); err == nil {
				io.Copy(io.Discard, c) // the agent sends nothing
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(-1, &ws, 0, nil); err != nil && err != syscall.EINTR {
			time.Sleep(200 * time.Millisecond) // no child yet
		}
	}
}

// runBridge joins its stdin and stdout (the exec stream from a kiln
// replica) to the agent's socket, until either side ends.
func runBridge() int {
	// A Pod that has just started may not be listening yet.
	var c *os.File
	var err error
	for deadline := time.Now().Add(BridgeWait); ; time.Sleep(10 * time.Millisecond) {
		if c, err = dial(AgentSocket); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		os.Stderr.WriteString("kiln pod bridge: connect " + AgentSocket + ": " + err.Error() + "\n")
		return 1
	}
	stdin, stdout := pollable(0, "stdin"), pollable(1, "stdout")
	go func() {
		io.Copy(c, stdin)
		// the replica hung up: so does the bridge, one way
		if rc, err := c.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_WR) })
		}
	}()
	io.Copy(stdout, c)
	return 0
}

// dial connects to one of the agent's abstract unix sockets ("@name").
func dial(name string) (*os.File, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	// A unix socket connects at once or fails (EAGAIN: a full backlog),
	// also when it does not block.
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: name}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil // non-blocking: the poller's
}

// pollable is fd made non-blocking, so that os gives it to the poller; if
// it cannot be, the file as it is.
func pollable(fd int, name string) *os.File {
	syscall.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), name)
}
