// Package spawn is the last step between the agent and user code. The agent
// starts a re-executed copy of the kiln binary in this mode for every user
// process; it joins the user cgroup, sets rlimits, drops to the unprivileged
// user with no capabilities, applies Landlock and the seccomp filter, closes
// every inherited descriptor, and execs the program. Nothing of kiln stays
// in the process after that exec.
package spawn

// Arg is argv[1] of the spawn stage.
const Arg = "__kiln-spawn"

// Config is argv[2] of the spawn stage, as JSON. The user's argv follows it.
type Config struct {
	UID       int      `json:"uid"`
	Dir       string   `json:"dir"`        // absolute working directory
	Cgroup    []byte   `json:"cgroup"`     // cgroups.HandleSpec, JSON
	OpenFiles int64    `json:"open_files"` // RLIMIT_NOFILE
	FileSize  int64    `json:"file_size"`  // RLIMIT_FSIZE
	Landlock  bool     `json:"landlock"`   // fail rather than run without Landlock
	WritePath []string `json:"write_paths"`
}

// ExitSetupFailed is the exit status when set-up failed before exec; the
// reason is on stderr. 127 (command not found) stays the shells' meaning.
const (
	ExitSetupFailed = 126
	ExitNotFound    = 127
)
