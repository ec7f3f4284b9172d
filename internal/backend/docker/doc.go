// Package docker is the Docker backend: each sandbox is a container of
// the environment image (BuildImage) whose entrypoint is kiln's agent, the
// same static binary, reached through the container's attach stream
// (the agent's stdin and stdout carry the agent protocol). The
// container is the isolation: a non-root user, no capabilities,
// no-new-privileges, a read-only root, no network, cgroup limits.
package docker

// AgentArg is argv[1] of the agent in a container (agent_linux.go).
const AgentArg = "__kiln-container-agent"
