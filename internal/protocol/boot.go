package protocol

import "encoding/json"

// Boot is what the service tells a new sandbox's init stage before anything
// else: how to build the root, which limits apply and where the agent's
// connection is. It travels as one JSON document on a pipe (fd BootFD).
type Boot struct {
	Hostname  string   `json:"hostname"`
	StageDir  string   `json:"stage_dir"`  // empty host directory to build the new root on
	ROBinds   []string `json:"ro_binds"`   // host directories bound read-only at the same path (/usr, ...)
	EtcBinds  []string `json:"etc_binds"`  // entries of the host's /etc bound read-only if present
	EtcFiles  []File   `json:"etc_files"`  // synthetic files written into /etc
	Workspace string   `json:"workspace"`  // path of the workspace inside the sandbox
	HostDir   string   `json:"host_dir"`   // if set, the host directory bound as the workspace; else a tmpfs
	UserUID   int      `json:"user_uid"`   // uid and gid user code runs as (inside the sandbox)
	TmpBytes  int64    `json:"tmp_bytes"`  // size of /tmp
	ShmBytes  int64    `json:"shm_bytes"`  // size of /dev/shm
	WorkBytes int64    `json:"work_bytes"` // size of the workspace tmpfs
	Inodes    int64    `json:"inodes"`     // inodes of /tmp and of the workspace, each
	// Mounts are host directories shown read-only (nosuid, nodev) inside
	// the sandbox; each Source is a real path, without symlinks, that the
	// boot opens refusing any (package native checks it first).
	Mounts []Mount `json:"mounts,omitempty"`
	// EgressSocket, when set, is the host path of the unix socket of the
	// sandbox's egress proxy session, bound at EgressSocketPath inside
	// (opened refusing symlinks, as Mounts are).
	EgressSocket string `json:"egress_socket,omitempty"`
	// BuildCache, when set, is the host directory of the user's build
	// caches, bound read-write (nosuid, nodev) at BuildCachePath; only
	// that user's sandboxes get it (opened refusing symlinks, as Mounts
	// are).
	BuildCache string `json:"build_cache,omitempty"`

	// Agent is passed on to the agent stage untouched.
	Agent AgentConfig `json:"agent"`
}

// BuildCachePath is where a sandbox sees its user's build caches
// (Boot.BuildCache): on /tmp, which user code may write.
const BuildCachePath = "/tmp/.kiln-cache"

// Mount is a host directory (Source) bound read-only at Target, inside the
// sandbox.
type Mount struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// File is a small synthetic file.
type File struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// AgentConfig is what the agent (PID 1) needs once the root is built.
type AgentConfig struct {
	ConnFD    int             `json:"conn_fd"`   // the service's end of the socketpair
	Cgroup    json.RawMessage `json:"cgroup"`    // cgroups.HandleSpec for the user cgroup
	KeepFDs   []int           `json:"keep_fds"`  // descriptors the agent inherits besides ConnFD
	Workspace string          `json:"workspace"` // absolute, inside the sandbox
	UserUID   int             `json:"user_uid"`
	Env       []string        `json:"env"` // base environment of user processes
	OpenFiles int64           `json:"open_files"`
	FileSize  int64           `json:"file_size"`
	Landlock  bool            `json:"landlock"` // required: fail an exec rather than run it without Landlock
	// Egress, when set, is the unix socket of the egress proxy inside the
	// sandbox; the agent bridges EgressProxyAddr to it.
	Egress string `json:"egress,omitempty"`
}

// BootArg is argv[1] of a re-executed kiln that is to become a sandbox's
// PID 1. The service starts it; nobody else should.
const BootArg = "__kiln-sandbox"

// Fixed descriptors in the init stage. The service lays them out with
// exec.Cmd.ExtraFiles, which starts at 3.
const (
	BootFD     = 3 // the Boot document, then EOF
	ConnFD     = 4 // the agent connection
	FirstCgrFD = 5 // cgroup handles follow
)
