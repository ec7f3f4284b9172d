// Package podlink is the link container's side of a kiln sandbox Pod
// (package kubernetes): its PID 1, and the bridge each kiln replica
// execs there to reach the agent. Both are the kiln binary, started
// under the link container's small CPU share (a CFS quota of a few
// milliseconds a period), where each millisecond of a process's start
// is felt: a bridge that ran every package's init of the kiln binary
// took 12 ms of CPU, three periods of the quota, before it connected.
// This package needs only the standard library and x/sys, so Go
// initializes it, and its init dispatches, before most of the binary's
// packages (as internal/agent/stage does for the sandbox stages).
package podlink

import "time"

// Argv[1] of the link container's two roles of the kiln binary.
const (
	// BridgeArg joins the exec stream's stdin and stdout to the agent,
	// in the link container.
	BridgeArg = "__kiln-pod-bridge"
	// LinkArg is the link container's PID 1: it reaps and holds the
	// lifeline.
	LinkArg = "__kiln-pod-link"
)

// The agent's abstract unix sockets, in the Pod's network namespace.
const (
	AgentSocket    = "@kiln-agent"
	LifelineSocket = "@kiln-lifeline"
)

// BridgeWait bounds the bridge's wait for the agent to listen.
const BridgeWait = 30 * time.Second
