// Package kubernetes is the sandbox backend on Kubernetes (issue 15):
// each sandbox is a Pod of the kiln environment image (the Docker
// backend's image, brought into the cluster), hardened as
// docs/KUBERNETES.md says, found again by its labels. The agent is the
// sandbox container's PID 1 and serves one kiln replica after another on
// an abstract unix socket in the Pod's network namespace; a replica
// reaches it through the API server, by an exec stream running a small
// bridge in the Pod's second container (agent_linux.go). So the API
// server's authentication guards it, nothing listens on the Pod network,
// and any replica can reach any sandbox.
package kubernetes

// Argv[1] of the two roles of the kiln binary in a sandbox Pod.
const (
	// AgentArg starts the agent, the Pod's PID 1; argv[2] is its
	// configuration (agent.Unisolated, JSON).
	AgentArg = "__kiln-pod-agent"
	// BridgeArg joins the exec stream's stdin and stdout to the agent,
	// in the link container.
	BridgeArg = "__kiln-pod-bridge"
	// LinkArg is the link container's PID 1, which only reaps.
	LinkArg = "__kiln-pod-link"
)
