// Package native is the default sandbox backend: Linux namespaces, cgroups,
// seccomp and Landlock driven from Go, in the spirit of nsjail and
// bubblewrap. It runs on the host as root. Create starts a re-executed copy
// of the kiln binary in fresh namespaces (package agent/boot); that copy
// builds the root and becomes the agent, which the returned Sandbox talks to.
package native
