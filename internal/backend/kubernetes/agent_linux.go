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
const (
	agentSocket = "@kiln-agent"
	linkUID     = docker.UID + 1
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

// runLink is the link container's PID 1: the bridges come later, by
// exec, and end up here if orphaned, so it reaps; it exits on TERM (the
// Pod's deletion).
func runLink() int {
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
