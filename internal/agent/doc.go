// Package agent is the kiln agent: PID 1 of every sandbox. It serves one
// connection from the service (package protocol), runs user processes
// through the spawn stage, streams their output, enforces per-execution
// limits, reaps every child, and performs file operations inside the
// workspace.
//
// The agent runs as root of the sandbox's user namespace, which maps to an
// unprivileged host uid. It imports only what it needs; a test keeps that
// list short.
package agent
