// Package kubernetes is the sandbox backend on Kubernetes (issue 15):
// each sandbox is a Pod of the kiln environment image (the Docker
// backend's image, brought into the cluster), hardened as
// docs/KUBERNETES.md says, found again by its labels. The agent is
// reached through the API server: an exec stream into the Pod runs the
// agent with the protocol on its stdin and stdout, so the API server's
// authentication guards it and nothing listens on the Pod network.
package kubernetes

// HoldArg is argv[1] of a sandbox Pod's PID 1 (hold_linux.go): it only
// reaps, so the Pod lives until it is deleted.
const HoldArg = "__kiln-pod-hold"
