package kubernetes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/backend/docker"
)

// A sandbox Pod has two containers. The sandbox container runs the
// agent as its PID 1 and user code, as docker.UID. The link container
// runs as linkUID and holds nothing but the bridges that kiln's replicas
// exec there: each joins its exec stream to the agent's abstract unix
// socket, which lives in the Pod's network namespace, shared by both
// containers (and has no file user code could replace). User code can
// connect to the socket too, but the agent serves only linkUID
// (fromLink); and the bridges are in another pid namespace and of another
// uid, so user code can neither see nor signal them: kill -9 -1 does not
// cut kiln off.
//
// The link container also holds the sandbox's lifeline, a connection to
// the agent's second socket: the kubelet stops a deleted Pod's containers
// with SIGTERM, which the agent, PID 1 out of user code's reach, must drop
// (it cannot tell the kubelet's from user code's), and then with SIGKILL
// after a grace period of at least 2 s. The link's PID 1 ends on SIGTERM;
// its end closes the lifeline, and the agent ends everything and exits:
// a Pod's deletion takes milliseconds, not those 2 s.
const (
	agentSocket    = "@kiln-agent"
	lifelineSocket = "@kiln-lifeline"
	linkUID        = docker.UID + 1
)

func init() {
	// The agent runs each program through the rlimit stage of /kiln,
	// which is this binary: a test binary too, whose main would run its
	// tests instead.
	agent.Dispatch()
	switch {
	case len(os.Args) == 3 && os.Args[1] == AgentArg:
		os.Exit(runAgent(os.Args[2]))
	case len(os.Args) == 2 && os.Args[1] == BridgeArg:
		os.Exit(runBridge())
	case len(os.Args) == 2 && os.Args[1] == LinkArg:
		os.Exit(runLink())
	}
}

// runAgent is the Pod's PID 1: the Docker backend's container agent
// (out of user code's reach, though it runs as the same uid), serving
// one replica after another (agent.ServeClients).
func runAgent(config string) int {
	docker.PrepareAgent()
	var cfg agent.Unisolated
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "kiln pod agent: %v\n", err)
		return 1
	}
	ln, err := net.Listen("unix", agentSocket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kiln pod agent: %v\n", err)
		return 1
	}
	life, err := net.Listen("unix", lifelineSocket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kiln pod agent: %v\n", err)
		return 1
	}
	go holdLifeline(life)
	if err := agent.ServeClients(ln, fromLink, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "kiln pod agent: %v\n", err)
		return 1
	}
	return 0
}

// fromLink passes a connection only from the Pod's link container's
// user (linkUID): user code runs as another uid, in another pid
// namespace, without the capabilities to change either.
func fromLink(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errors.New("not a unix connection")
	}
	cred, err := docker.PeerCred(uc)
	if err != nil {
		return err
	}
	if cred.Uid != linkUID {
		return fmt.Errorf("a connection from uid %d, not from kiln's bridge (uid %d)", cred.Uid, linkUID)
	}
	return nil
}

// holdLifeline waits for the link container's lifeline, and when it
// ends, ends the sandbox: every process in it, then the agent itself.
// Connections from anyone else are closed unread.
func holdLifeline(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if fromLink(c) != nil {
			c.Close()
			continue
		}
		io.Copy(io.Discard, c) // nothing comes: it returns at the link's end
		unix.Kill(-1, unix.SIGKILL)
		os.Exit(0)
	}
}

// runLink is the link container's PID 1: the bridges come later, by
// exec, and end up here if orphaned, so it reaps; it holds the lifeline
// to the agent; it exits on TERM (the Pod's deletion).
func runLink() int {
	go func() {
		// The agent may not listen yet; once connected, the lifeline
		// stays open until this process ends.
		for {
			if c, err := net.Dial("unix", lifelineSocket); err == nil {
				io.Copy(io.Discard, c) // the agent sends nothing
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM, unix.SIGINT)
	go func() {
		<-term
		os.Exit(0)
	}()
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); err != nil && err != unix.EINTR {
			time.Sleep(200 * time.Millisecond) // no child yet
		}
	}
}

// bridgeWait bounds the bridge's wait for the agent to listen.
const bridgeWait = 30 * time.Second

// runBridge joins its stdin and stdout (the exec stream from a kiln
// replica) to the agent's socket, until either side ends.
func runBridge() int {
	// A Pod that has just started may not be listening yet.
	var c net.Conn
	var err error
	for deadline := time.Now().Add(bridgeWait); ; time.Sleep(10 * time.Millisecond) {
		if c, err = net.Dial("unix", agentSocket); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kiln pod bridge: %v\n", err)
		return 1
	}
	go func() {
		io.Copy(c, os.Stdin)
		c.(*net.UnixConn).CloseWrite() // the replica hung up
	}()
	io.Copy(os.Stdout, c)
	return 0
}
