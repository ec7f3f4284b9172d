package docker

import "github.com/kiln-dev/kiln/internal/osthreads"

// The agent shares the container's pids cgroup with user code, and the Go
// runtime makes an OS thread whenever it needs one (a goroutine blocked
// in a system call holds its thread); if the clone fails, as it does
// while a fork bomb holds every pid, the runtime aborts, and the sandbox
// is lost. So the agent makes its threads at start, while pids are free,
// and the runtime keeps them idle for reuse: with spareThreads of them
// the agent serves, kills and reaps through a fork bomb without a new one.
// The container's pids limit is the session's plus agentPids, the
// agent's threads, so user code still gets its whole limit.
const (
	spareThreads = 16
	agentPids    = 48 // the agent (~8 threads at rest) + spareThreads, with room
)

// reserveThreads has the runtime make n more OS threads and leaves them
// idle (osthreads.Reserve).
func reserveThreads(n int) { osthreads.Reserve(n) }
