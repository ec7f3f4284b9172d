package kubernetes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/backend/kubernetes/podlink"
	"github.com/kiln-dev/kiln/internal/protocol"
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
	agentSocket    = podlink.AgentSocket
	lifelineSocket = podlink.LifelineSocket
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
	}
}

// podConfig is the sandbox container's agent configuration.
type podConfig struct {
	agent.Unisolated
	// APIServer ("host:port"), when set, is the API server as a Pod
	// reaches it: the agent serves no one until the Pod cannot
	// (isolatedFrom).
	APIServer string `json:",omitempty"`
}

// runAgent is the Pod's PID 1: the Docker backend's container agent
// (out of user code's reach, though it runs as the same uid), serving
// one replica after another (agent.ServeClients).
func runAgent(config string) int {
	docker.PrepareAgent()
	var cfg podConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "kiln pod agent: %v\n", err)
		return 1
	}
	// The check runs while the agent starts and kiln's first bridge
	// comes, instead of after the bridge, as a probe through the agent.
	isolation := make(chan error, 1)
	go func() { isolation <- isolatedFrom(cfg.APIServer) }()
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
	if err := agent.ServeClients(ln, afterIsolation(fromLink, isolation), cfg.Unisolated); err != nil {
		fmt.Fprintf(os.Stderr, "kiln pod agent: %v\n", err)
		return 1
	}
	return 0
}

// isolationWait bounds the wait for the network plugin to program the
// Pod's NetworkPolicy: a plugin that never enforces it fails the
// sandbox's start, rather than handing out a sandbox with the cluster's
// network.
var isolationWait = 15 * time.Second // a variable for tests

// isolatedFrom returns nil once a connection to addr (the API server)
// fails, and an error if one still succeeds after isolationWait. The
// plugin programs a new Pod's NetworkPolicy asynchronously: on the test
// cluster (kube-router) a Pod reached the API server for its first
// moments. A denied connect is refused or dropped; a dropped one waits
// out the timeout, which a connect to a reachable API server takes a
// fraction of.
func isolatedFrom(addr string) error {
	if addr == "" {
		return nil
	}
	for deadline := time.Now().Add(isolationWait); ; time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			return nil
		}
		c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("the sandbox's Pod reaches the API server at %s: this cluster does not enforce kiln's NetworkPolicy (its network plugin must enforce NetworkPolicy)", addr)
		}
	}
}

// afterIsolation is trusted, holding each connection until the
// isolation check is done. If the Pod is not isolated, each bridge gets
// the reason as an error instead of the agent's hello, and is closed.
func afterIsolation(trusted func(net.Conn) error, isolation <-chan error) func(net.Conn) error {
	var once sync.Once
	var failed error
	return func(c net.Conn) error {
		if err := trusted(c); err != nil {
			return err
		}
		once.Do(func() { failed = <-isolation })
		if failed != nil {
			protocol.NewWriter(c).Send(0, protocol.TError, protocol.Error{Code: protocol.ErrInternal, Message: failed.Error()})
		}
		return failed
	}
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
