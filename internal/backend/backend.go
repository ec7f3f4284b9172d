// Package backend holds the vocabulary of sandbox backends: what a sandbox
// is asked to be (Spec), what the engine learns of one it made (Sandbox),
// and what a backend can promise (Capabilities). The interface itself,
// engine.Backend, belongs to its one consumer, the engine; this package
// exists so that backends can implement it without importing the engine.
package backend

import "github.com/kiln-dev/kiln/internal/kiln"

// Spec describes one sandbox.
type Spec struct {
	Limits kiln.Limits // zero fields take defaults
	Env    []string    // extra KEY=VALUE for user processes, on top of the backend's base
	// HostDir, when set, is a host directory used as the workspace (the
	// service keeps workspaces outside the sandbox so they outlive it);
	// else the workspace dies with the sandbox.
	HostDir string
	// Mounts are host directories shown read-only in the sandbox (project
	// code); each Source is a real path that the caller resolved and
	// allowed (native.ResolveMount).
	Mounts []Mount
	// EgressSocket, when set, is the host path of a unix socket on which
	// the caller serves the sandbox's egress proxy session (package
	// egress); a backend that supports it makes it the sandbox's only way
	// out (native.Spec.EgressSocket), one that does not ignores it.
	EgressSocket string
	// BuildCache, when set, is a host directory of the user's build caches
	// (Go's build cache, compiled programs, Cargo's target directory),
	// shown read-write in the sandbox at Sandbox.BuildCache; the caller
	// gives it only to that user's sandboxes. A backend that does not
	// support it ignores it (Sandbox.BuildCache stays empty).
	BuildCache string
	// Resources are extended resources (nvidia.com/gpu: 1) the sandbox
	// asks for, each within the administrator's allowlist (CheckResources).
	// Only the Kubernetes backend has them: with another backend the
	// allowlist is empty and the service refuses any.
	Resources map[string]int64
}

// Mount is a host directory (Source) shown read-only at Target in the
// sandbox; a Target of "" is the backend's default (/mnt/<name>).
type Mount struct {
	Source string
	Target string
}

// Sandbox is what the engine knows of a sandbox a backend made.
type Sandbox struct {
	ID string
	// Workspace is the workspace as the sandbox's processes see it, and
	// BuildArea the private place outside it where program languages are
	// built (package programs). Empty means package programs' defaults,
	// /workspace and /tmp/.kiln.
	Workspace string
	BuildArea string
	// BuildCache is where the sandbox sees Spec.BuildCache; empty: none.
	BuildCache string
}

// Capabilities say what a backend enforces, so that tests and callers
// do not have to know backends by name.
type Capabilities struct {
	Name string // "native", "unboxed"
	// Isolation: user code cannot read the host's files, see its
	// processes or reach its network, and runs without privileges. Only a
	// backend with isolation may run untrusted code.
	Isolation bool
	// Limits: memory, processes and CPU are enforced for the whole
	// sandbox (cgroups), and hitting one is reported. Without it only the
	// per-execution time and output limits, which the agent enforces
	// itself, hold.
	Limits bool
}
