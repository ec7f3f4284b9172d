// Package unboxed is a sandbox backend without a sandbox, for tests only:
// the real agent runs as a plain process of the current user, on a
// temporary directory as its workspace, and talks to the engine over a
// socketpair. It has no isolation and no cgroup limits (Capabilities say
// so), so it needs no root, and tests of the engine, service and server
// that do not test isolation run on it in parallel.
//
// It must never run untrusted code. No command imports it (a test checks
// that cmd/kiln does not), and no flag names it.
//
// The agent runs in a child process, a re-execution of the test binary
// (this package's init catches it), not in the test's own process: an
// agent reaps every child and kills its descendants, and it clears its
// environment, none of which a test process can allow.
package unboxed
