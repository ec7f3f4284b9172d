// Package boot is the first stage inside a new sandbox. It runs in a
// re-executed copy of the kiln binary that the service started in fresh
// user, mount, pid, net, ipc and uts namespaces. It builds the read-only
// root, enters a cgroup namespace, brings up loopback, and then execs the
// agent, which keeps PID 1.
//
// Exec-ing a fresh copy of the binary for the agent matters: namespaces
// entered with unshare apply to the calling thread only, and the exec makes
// them the namespaces of every thread of the agent.
package boot
