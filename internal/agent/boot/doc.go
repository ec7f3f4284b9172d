// Package boot is the first stage inside a new sandbox. It runs in a
// re-executed copy of the kiln binary that the service started in fresh
// user, mount, pid, net, ipc, uts and cgroup namespaces. It builds the
// read-only root and brings up loopback; the same process then goes on as
// the agent, PID 1 of the sandbox.
package boot
