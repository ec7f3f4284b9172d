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

import "github.com/kiln-dev/kiln/internal/backend/kubernetes/podlink"

// Argv[1] of the roles of the kiln binary in a sandbox Pod.
const (
	// AgentArg starts the agent, the Pod's PID 1; argv[2] is its
	// configuration (podConfig, JSON).
	AgentArg = "__kiln-pod-agent"
	// BridgeArg and LinkArg are the link container's (podlink).
	BridgeArg = podlink.BridgeArg
	LinkArg   = podlink.LinkArg
)
