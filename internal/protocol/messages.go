package protocol

// Message types. Requests go from the service to the agent; events come back
// with the id of the request they answer.
const (
	// Connection.
	THello = "hello" // both ways, id 0, body Hello

	// Requests.
	TExec     = "exec"     // body Exec; events: started, stdout, stderr, exit | error
	TStdin    = "stdin"    // body Stdin: data for a running exec (same id)
	TSignal   = "signal"   // body Signal: to a running exec (same id)
	TCancel   = "cancel"   // no body: kill a running exec and its whole tree (same id)
	TFileOp   = "file"     // body FileOp; events: data* then ok | error
	TPing     = "ping"     // no body; event: ok
	TShutdown = "shutdown" // no body; the agent kills everything and exits

	// Events.
	TStarted = "started" // body Started
	TStdout  = "stdout"  // body Data
	TStderr  = "stderr"  // body Data
	TExit    = "exit"    // body ExitInfo; the last event of an exec
	TData    = "data"    // body Data: a chunk of a file being read
	TOK      = "ok"      // body FileResult (may be empty); the last event of a request
	TError   = "error"   // body Error; the last event of a request
)

// Hello opens the connection each way.
type Hello struct {
	Version int    `json:"version"`
	Agent   string `json:"agent,omitempty"` // agent build, for logs
}

// Exec starts a process in the sandbox as the unprivileged user.
type Exec struct {
	Argv        []string `json:"argv"`
	Env         []string `json:"env,omitempty"` // KEY=VALUE, already allowlisted by the service
	Dir         string   `json:"dir,omitempty"` // relative to the workspace
	Stdin       []byte   `json:"stdin,omitempty"`
	StdinOpen   bool     `json:"stdin_open,omitempty"` // more stdin follows in TStdin messages
	TimeoutMs   int64    `json:"timeout_ms"`
	OutputBytes int64    `json:"output_bytes"`
	// KillScope says what a timeout, cancel or output overflow kills:
	// KillSandbox (the default) kills every process in the sandbox but the
	// agent, in one pass that no fork, double fork or setsid escapes — for
	// sandboxes that run one thing. KillGroup kills the exec's process
	// group and session, leaving a session's kernels alone.
	KillScope string `json:"kill_scope,omitempty"`
	// Files are written into the workspace before the process starts, saving
	// a round trip each; if one fails, nothing runs. Only FileWrite ops.
	Files []FileOp `json:"files,omitempty"`
}

// Kill scopes of an Exec.
const (
	KillSandbox = ""
	KillGroup   = "group"
)

// Stdin carries more input for a running exec. EOF closes its stdin.
type Stdin struct {
	Data []byte `json:"data,omitempty"`
	EOF  bool   `json:"eof,omitempty"`
}

// Signal sends a signal by name (SIGINT, SIGTERM, ...) to a running exec's
// process group.
type Signal struct {
	Name string `json:"name"`
}

// Started says the process is running.
type Started struct {
	Pid int `json:"pid"` // in the sandbox's pid namespace
}

// Data is a chunk of bytes: output or file contents.
type Data struct {
	Data []byte `json:"data"`
}

// ExitInfo ends an exec.
type ExitInfo struct {
	Code            int    `json:"code"`             // -1 when killed by a signal
	Signal          string `json:"signal,omitempty"` // the signal that ended it
	WallNs          int64  `json:"wall_ns"`
	CPUNs           int64  `json:"cpu_ns"`
	PeakMemory      int64  `json:"peak_memory_bytes"`
	OutputBytes     int64  `json:"output_bytes"`
	TimedOut        bool   `json:"timed_out,omitempty"`
	Canceled        bool   `json:"canceled,omitempty"`
	OOMKilled       bool   `json:"oom_killed,omitempty"`
	PidsLimited     bool   `json:"pids_limited,omitempty"`
	OutputTruncated bool   `json:"output_truncated,omitempty"`
}

// File operations.
const (
	FileWrite  = "write"  // Path, Data, Mode, Append or Exclusive; creates parents
	FileRead   = "read"   // Path, Offset, Limit (at most MaxRead); answered with data chunks
	FileList   = "list"   // Path
	FileStat   = "stat"   // Path
	FileDelete = "delete" // Path, Recursive
	FileMkdir  = "mkdir"  // Path (parents too)
	FileMove   = "move"   // Path to To, Overwrite; creates To's parents
)

// MaxRead is the most one read answers; larger files are read on from an
// Offset.
const MaxRead = 256 << 20

// FileOp is one file operation inside the workspace. Path is relative to the
// workspace root and may not leave it.
type FileOp struct {
	Op        string `json:"op"`
	Path      string `json:"path"`
	Data      []byte `json:"data,omitempty"`
	Mode      uint32 `json:"mode,omitempty"`
	Append    bool   `json:"append,omitempty"`
	Offset    int64  `json:"offset,omitempty"`
	Limit     int64  `json:"limit,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	// Exclusive makes a write create the file or fail with ErrExists,
	// never replace one (O_EXCL). Not with Append.
	Exclusive bool `json:"exclusive,omitempty"`
	// To is a move's target, resolved like Path. Without Overwrite an
	// existing target fails with ErrExists.
	To        string `json:"to,omitempty"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// FileInfo describes one workspace entry.
type FileInfo struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"` // permission bits
	Type    string `json:"type"` // file, dir, symlink, other
	ModTime int64  `json:"mtime_ns"`
}

// FileResult answers a file operation.
type FileResult struct {
	Info    *FileInfo  `json:"info,omitempty"`
	Entries []FileInfo `json:"entries,omitempty"`
	Written int64      `json:"written,omitempty"`
}

// Error ends a request that failed. Code is one of the Err* values.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes. They are stable: the service maps them to its own error
// kinds. A file operation's code comes from the errno where there is one.
const (
	ErrInvalid  = "invalid"   // a bad request or path (also ENAMETOOLONG, ELOOP, EINVAL)
	ErrNotFound = "not_found" // ENOENT
	ErrExists   = "exists"    // EEXIST: an exclusive write or a move without overwrite
	ErrTooLarge = "too_large" // over a bound of the agent's, or EFBIG
	ErrBusy     = "busy"
	ErrInternal = "internal"
	ErrNotDir   = "not_dir"   // ENOTDIR: a path's parent, or a listed path, is not a directory
	ErrIsDir    = "is_dir"    // EISDIR: a directory where a file was needed
	ErrNotEmpty = "not_empty" // ENOTEMPTY: a directory that had to be empty is not
	ErrNoSpace  = "no_space"  // ENOSPC or EDQUOT: the workspace is full (bytes or inodes)
)
