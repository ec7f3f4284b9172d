// Package spawn is the last step between the agent and user code. The agent
// starts a re-executed copy of the kiln binary in this mode ahead of need (a
// "spare"); it works in two phases:
//
//  1. At start, with the Config it reads from its control pipe: join the
//     user cgroup, enter a cgroup namespace rooted there, set rlimits and
//     compile the seccomp filter. Then it waits.
//  2. When a Request arrives on the same pipe: drop to the unprivileged user
//     with no capabilities, apply Landlock, close every inherited descriptor,
//     load the seccomp filter and exec the program.
//
// A waiting spare counts against the user's limits (a few MiB of memory and
// a couple of pids), so the agent keeps at most one, and starts it only
// when no execution is running.
//
// Phase 1 (mostly the Go runtime starting) is off the critical path of an
// execution; phase 2 takes well under a millisecond. Nothing of kiln stays
// in the process after the exec. A spare whose pipe closes exits quietly.
package spawn

// Arg is argv[1] of the spawn stage.
const Arg = "__kiln-spawn"

// Descriptors of the spawn stage: stdio, the channel of a REPL kernel
// (kept only when the request asks for it), the control pipe, then the
// cgroup handles.
const (
	ChannelFD  = 3
	CtlFD      = 4
	FirstCgrFD = 5
)

// Config is the first JSON document on the control pipe: what is the same
// for every execution in a sandbox.
type Config struct {
	UID       int      `json:"uid"`
	Cgroup    []byte   `json:"cgroup"`     // cgroups.HandleSpec, JSON
	OpenFiles int64    `json:"open_files"` // RLIMIT_NOFILE
	FileSize  int64    `json:"file_size"`  // RLIMIT_FSIZE
	Landlock  bool     `json:"landlock"`   // fail rather than run without Landlock
	WritePath []string `json:"write_paths"`
}

// Request is the second JSON document: the program to run.
type Request struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"` // absolute working directory
	// Channel keeps fd 3, the agent's socket to a REPL kernel; otherwise
	// it is closed like every other inherited descriptor.
	Channel bool `json:"channel,omitempty"`
}

// Exit statuses when set-up failed before exec; the reason is on stderr.
// 127 keeps the shells' meaning: command not found.
const (
	ExitSetupFailed = 126
	ExitNotFound    = 127
)

// MaxRequest bounds either document; argv and env beyond it could not be
// passed to execve anyway.
const MaxRequest = 4 << 20
