package client

import (
	"encoding/json"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// The result model is the engine's own; these aliases let callers name it.
type (
	CellResult = kiln.CellResult
	CellStatus = kiln.CellStatus
	Output     = kiln.Output
	CellError  = kiln.CellError
	Diagnostic = kiln.Diagnostic
	Artifact   = kiln.Artifact
	Usage      = kiln.Usage
	TestReport = kiln.TestReport
	TestCase   = kiln.TestCase
	// NetworkPolicy is a session's network policy: {"mode": "none"} (the
	// default) or {"mode": "allowlist", "allow": ["example.com",
	// "*.example.com", "api.example.com:8443"]}.
	NetworkPolicy = kiln.NetworkPolicy
	// EgressRecord is one connection attempt through kiln's egress proxy
	// (CellResult.Egress, the audit log).
	EgressRecord = kiln.EgressRecord
)

// Limits bound a session's sandbox or a one-shot run. Zero fields take the
// server's defaults; the server answers 400 naming the allowed range for a
// value outside it.
type Limits struct {
	TimeoutMS      int64 `json:"timeout_ms,omitempty"`      // wall clock per execution
	MemoryBytes    int64 `json:"memory_bytes,omitempty"`    // user processes together, no swap
	Pids           int64 `json:"pids,omitempty"`            // processes and threads together
	CPUMillis      int64 `json:"cpu_millis,omitempty"`      // 1000 = one CPU
	OutputBytes    int64 `json:"output_bytes,omitempty"`    // stdout, stderr, displays and errors together per execution or cell
	FileSizeBytes  int64 `json:"file_size_bytes,omitempty"` // largest file a process may write
	OpenFiles      int64 `json:"open_files,omitempty"`      // per process
	TmpBytes       int64 `json:"tmp_bytes,omitempty"`       // size of /tmp
	WorkspaceBytes int64 `json:"workspace_bytes,omitempty"` // size of the workspace
	Inodes         int64 `json:"inodes,omitempty"`          // files in /tmp and in the workspace, each
}

// SessionRequest creates a session (POST /v1/sessions).
type SessionRequest struct {
	// Languages the session will use; the first is the default for cells
	// that name none. Empty means ["python"].
	Languages []string `json:"languages,omitempty"`
	Limits    Limits   `json:"limits,omitempty"`
	// IdleTTLSeconds ends the session after this long without a cell, a
	// stream or a file operation. 0 means the server's default (one hour).
	IdleTTLSeconds int64 `json:"idle_ttl_seconds,omitempty"`
	// Network is the session's network policy; nil is {"mode": "none"}.
	// A non-admin may allow at most the server's ceiling (kiln serve
	// --egress-allow). A bare string is read as the mode.
	Network  *NetworkPolicy    `json:"network,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Mounts are server folders shown read-only in the session's sandbox
	// (project code); only folders under the roots that the server's
	// administrator allowed (kiln serve --mount-root) can be mounted.
	Mounts []Mount `json:"mounts,omitempty"`
	// Environment selects a built environment by name (GET
	// /v1/environments): its packages are there from the first cell. An
	// unknown name is a 400, one not built yet a 409.
	Environment string `json:"environment,omitempty"`
	// Resources are extended resources (GPUs) for the session's sandbox,
	// by name: {"nvidia.com/gpu": 1}. Only a server whose administrator
	// allows them (kiln serve --backend kubernetes
	// --k8s-extended-resource) takes any; otherwise, or past the allowed
	// count, it answers 400 naming what is allowed, and 503 when no node
	// has that many free.
	Resources map[string]int64 `json:"resources,omitempty"`
}

// Mount is a server folder (Source, absolute) shown read-only at Target:
// /project, or below /mnt or /project; default /mnt/<the folder's name>.
type Mount struct {
	Source string `json:"source"`
	Target string `json:"target,omitempty"`
}

// Session is a long-lived sandbox with its workspace and kernels.
type Session struct {
	ID             string            `json:"id"`
	Status         string            `json:"status"` // active, ended
	Languages      []string          `json:"languages"`
	Limits         Limits            `json:"limits"`
	IdleTTLSeconds int64             `json:"idle_ttl_seconds"`
	Network        NetworkPolicy     `json:"network"`
	Metadata       map[string]string `json:"metadata"`
	Created        time.Time         `json:"created"`
	LastActive     time.Time         `json:"last_active"`
	Ended          *time.Time        `json:"ended,omitempty"`
	EndReason      string            `json:"end_reason,omitempty"`
	// OwnerID is the user who owns the session (and is charged for it);
	// a kiln server always sends it, and Role.
	OwnerID string `json:"owner_id,omitempty"`
	// Role is the caller's role in the session: "owner", or for a session
	// shared with the caller "collaborator" (runs cells, writes files,
	// interrupts, restarts) or "viewer" (reads history, outputs, files).
	Role string `json:"role,omitempty"`
	// Environment is the environment the session selected, if any.
	Environment string `json:"environment,omitempty"`
	// Name is the session's name (its metadata "name"), if it has one.
	Name string `json:"name,omitempty"`
	// Resources are the extended resources (GPUs) the session asked for
	// (SessionRequest.Resources); nil when none.
	Resources map[string]int64 `json:"resources,omitempty"`
	// Use is what the session uses now; only for a session active in
	// the server's process.
	Use *SessionUse `json:"use,omitempty"`
}

// SessionUpdate renames a session (PATCH /v1/sessions/{id}): at most
// 100 characters of printable UTF-8, trimmed; empty removes the name.
type SessionUpdate struct {
	Name *string `json:"name"`
}

// CompleteRequest asks the session's kernel for completions at Cursor
// (POST /v1/sessions/{id}/complete); Cursor counts Unicode code points.
type CompleteRequest struct {
	Code     string `json:"code"`
	Cursor   int    `json:"cursor"`
	Language string `json:"language,omitempty"` // default: the session's first
}

// Completion is what the kernel offers: each match replaces the code
// from CursorStart to CursorEnd (code points).
type Completion struct {
	Matches     []string `json:"matches"`
	CursorStart int      `json:"cursor_start"`
	CursorEnd   int      `json:"cursor_end"`
}

// FormatRequest formats code with the language's formatter, run in the
// session's sandbox (POST /v1/sessions/{id}/format).
type FormatRequest struct {
	Code     string `json:"code"`
	Language string `json:"language,omitempty"` // default: the session's first
}

// Formatted is the formatted code.
type Formatted struct {
	Code string `json:"code"`
}

// GitStatus is the workspace as a git repository
// (GET /v1/sessions/{id}/git/status); Repo false when it is not one.
type GitStatus struct {
	Repo   bool      `json:"repo"`
	Branch string    `json:"branch,omitempty"`
	Files  []GitFile `json:"files"`
}

// GitFile is a changed path with its index and worktree states as git
// status --porcelain gives them (M, A, D, R, ?, space).
type GitFile struct {
	Path     string `json:"path"`
	Index    string `json:"index"`
	Worktree string `json:"worktree"`
}

// GitDiff is a diff (GET /v1/sessions/{id}/git/diff); Cut when it was
// over 1 MiB and cut there.
type GitDiff struct {
	Diff string `json:"diff"`
	Cut  bool   `json:"cut,omitempty"`
}

// GitStageRequest stages paths (POST /v1/sessions/{id}/git/stage).
type GitStageRequest struct {
	Paths []string `json:"paths"`
}

// GitCommitRequest commits what is staged
// (POST /v1/sessions/{id}/git/commit).
type GitCommitRequest struct {
	Message string `json:"message"`
}

// GitRestoreRequest checks out Path as it was in Commit (a hash or
// HEAD~N) (POST /v1/sessions/{id}/git/restore).
type GitRestoreRequest struct {
	Commit string `json:"commit"`
	Path   string `json:"path"`
}

// GitBundleRequest makes the workspace a repository from a git bundle
// file in it (POST /v1/sessions/{id}/git/bundle).
type GitBundleRequest struct {
	Bundle string `json:"bundle"`
}

// GitCommit is one commit.
type GitCommit struct {
	Hash    string    `json:"hash"`
	Author  string    `json:"author"`
	Time    time.Time `json:"time"`
	Subject string    `json:"subject"`
}

// GitLog is the last commits, newest first
// (GET /v1/sessions/{id}/git/log).
type GitLog struct {
	Commits []GitCommit `json:"commits"`
}

// SessionUse is what an active session uses now.
type SessionUse struct {
	WorkspaceBytes      int64 `json:"workspace_bytes"`
	WorkspaceLimitBytes int64 `json:"workspace_limit_bytes"`
	// Busy: a cell, a stream or a file operation runs, so the idle clock
	// is stopped.
	Busy bool `json:"busy"`
	// IdleSecondsLeft is how long the session has until its idle time-out
	// ends it if nothing happens (the whole time-out while busy).
	IdleSecondsLeft int64 `json:"idle_seconds_left"`
	// CPUMs and PeakMemoryBytes are what the session's user code used in
	// its current sandbox (its cgroup); absent where the backend does not
	// measure them or the session has no sandbox now.
	CPUMs           *int64 `json:"cpu_ms,omitempty"`
	PeakMemoryBytes *int64 `json:"peak_memory_bytes,omitempty"`
}

// ShareRequest shares a session with a user or changes the share's role
// (PUT /v1/sessions/{id}/shares/{user_id}).
type ShareRequest struct {
	Role string `json:"role"` // viewer or collaborator
}

// Share is one user a session is shared with.
type Share struct {
	SessionID string    `json:"session_id"`
	UserID    string    `json:"user_id"`
	Role      string    `json:"role"` // viewer or collaborator
	Created   time.Time `json:"created"`
}

// ShareList is the shares of a session
// (GET /v1/sessions/{id}/shares).
type ShareList struct {
	Shares []Share `json:"shares"`
}

// SessionList is one page of sessions, newest first.
type SessionList struct {
	Sessions   []Session `json:"sessions"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// ExecRequest runs a cell in a session
// (POST /v1/sessions/{id}/executions).
type ExecRequest struct {
	Code      string   `json:"code"`
	Language  string   `json:"language,omitempty"` // default: the session's first language
	Stdin     *string  `json:"stdin,omitempty"`    // nil: reading stdin fails at once
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
	Args      []string `json:"args,omitempty"` // program languages only
	// FileName is, for a program language, the file name of Code (sol.c,
	// test.java): diagnostics name it. Code is built outside the workspace
	// and never written into it. Default main<ext>.
	FileName string `json:"file_name,omitempty"`
	// Entry, for a program language, runs the workspace's program whose
	// entry file this is (a project of several files, built as it is in
	// the workspace) instead of Code, which must be empty then.
	Entry string `json:"entry,omitempty"`
	// BuildOptions are, for a compiled language, compiler and linker flags
	// (-O2, -std=c++17, -lcrypto), checked against the toolchain's
	// allowlist; a refused one is an invalid request naming it.
	BuildOptions []string `json:"build_options,omitempty"`
	// Test runs the code as tests: Python with pytest, JavaScript with
	// node --test, Rust with rustc --test, Java with JUnit; the result
	// lists each test. Test files are also found by name (test_*.py,
	// *.test.js, *_test.go, *Test.java with @Test methods).
	Test bool `json:"test,omitempty"`
	// Packages are installed into the session before the code runs, as
	// POST /v1/sessions/{id}/packages would: with pip for Python, npm for
	// JavaScript and TypeScript ("requests==2.31.0", "left-pad@1.3.0").
	Packages []string `json:"packages,omitempty"`
}

// Execution is one cell of a session's history.
type Execution struct {
	ID        string      `json:"id"`
	SessionID string      `json:"session_id"`
	Seq       int64       `json:"seq"`
	Language  string      `json:"language"`
	Code      string      `json:"code"`
	Status    string      `json:"status"` // running, or the result's status
	Result    *CellResult `json:"result,omitempty"`
	Started   time.Time   `json:"started"`
	Ended     *time.Time  `json:"ended,omitempty"`
	// Actor is the user who ran the cell: the owner, or a collaborator of
	// a shared session (the owner is charged either way).
	Actor string `json:"actor,omitempty"`
}

// ExecutionList is one page of a session's history, oldest first.
type ExecutionList struct {
	Executions []Execution `json:"executions"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// Event is one message of an execution stream, over SSE (the event name
// is Type, the data is the JSON of the whole Event) or WebSocket (one
// JSON text message per Event).
type Event struct {
	Type string `json:"type"` // see the Event* constants
	// Data is the text of a stdout or stderr chunk.
	Data string `json:"data,omitempty"`
	// Output is a display event's MIME bundle.
	Output *Output `json:"output,omitempty"`
	// Execution is the started and done events' execution (with its
	// result when done).
	Execution *Execution `json:"execution,omitempty"`
	// Error is an error event's problem: the cell could not run at all.
	Error *Problem `json:"error,omitempty"`
	// Position is a queued event's place in line (1: next to start).
	Position int `json:"position,omitempty"`
	// Reason is why a queued event's cell waits: "session" (the session's
	// previous cell still runs), "user" (the user's own cells hold all the
	// slots one user may have) or "server" (every slot of the server is
	// taken). A cell may be queued for its session, then for a slot.
	Reason string `json:"reason,omitempty"`
	// Prompt is an input_request event's prompt: the cell's output since
	// its last newline or its last read (what input("Name: ") printed), at
	// most 1 KiB. It came in a stdout or stderr event already.
	Prompt string `json:"prompt,omitempty"`
	// Password says an input_request's input is a secret (Python's
	// getpass, bash's read -s): do not echo it.
	Password bool `json:"password,omitempty"`
	// Packages is, in a package install's stream, the done event's
	// result.
	Packages *PackageResult `json:"packages,omitempty"`
	// ExecutionID names the cell of an event of a session's event stream
	// (GET /v1/sessions/{id}/events), where the cells of every user of
	// the session are told.
	ExecutionID string `json:"execution_id,omitempty"`
}

// Stream event types, in the order they come: queued (only when the cell
// waits for its session or a slot), started, then stdout, stderr, display and
// input_request as they happen, then done or error.
const (
	EventQueued  = "queued"
	EventStarted = "started"
	EventStdout  = "stdout"
	EventStderr  = "stderr"
	EventDisplay = "display"
	// EventInputRequest says the cell (a session cell with streamed
	// stdin: Python, JavaScript and TypeScript reading stdin, bash's read
	// builtin) waits for input it has not been sent: a UI shows an input
	// box, with Prompt (hidden if Password). Send stdin (or end it) to go
	// on.
	EventInputRequest = "input_request"
	EventDone         = "done"
	EventError        = "error"
)

// WSMessage is what a client sends over the execution WebSocket
// (GET /v1/sessions/{id}/ws): first one "execute", then any number of
// "stdin" (Data; EOF closes the cell's stdin) and "interrupt".
type WSMessage struct {
	Type    string       `json:"type"` // execute, stdin, interrupt
	Execute *ExecRequest `json:"execute,omitempty"`
	Data    string       `json:"data,omitempty"`
	EOF     bool         `json:"eof,omitempty"`
}

// RunRequest is a one-shot run in a fresh sandbox (POST /v1/run).
type RunRequest struct {
	Language string   `json:"language"`
	Code     string   `json:"code"`
	Args     []string `json:"args,omitempty"` // program languages, Python, JavaScript and bash (as a script's argv)
	Stdin    string   `json:"stdin,omitempty"`
	Files    []File   `json:"files,omitempty"`
	Limits   Limits   `json:"limits,omitempty"`
	// FileName is, for a program language, the program's file name
	// (test.java): it is written into the workspace under it and built with
	// the files beside it, and messages name it. Default: a cell's main<ext>,
	// built outside the workspace.
	FileName string `json:"file_name,omitempty"`
	// BuildOptions: as ExecRequest's.
	BuildOptions []string `json:"build_options,omitempty"`
	// Test: as ExecRequest's.
	Test bool `json:"test,omitempty"`
	// Packages: as ExecRequest's, installed in the run's sandbox before
	// the code runs (pip for Python, npm for JavaScript and TypeScript
	// unless PackageManager says). They need Network's mode "allowlist":
	// under "none" the run is refused, saying so.
	Packages       []string `json:"packages,omitempty"`
	PackageManager string   `json:"package_manager,omitempty"`
	// Network is the run's network policy, within the server's ceiling
	// (admins may exceed it); nil is {"mode": "none"}.
	Network *NetworkPolicy `json:"network,omitempty"`
	// Cache takes the result from the caller's own result cache when the
	// same run (runtime version, code, files, stdin, args, limits) is
	// there, and keeps this one's; opt-in, since kiln cannot know whether
	// a program reads the clock or randomness. Never shared between users.
	Cache bool `json:"cache,omitempty"`
	// Environment runs the code with a built environment's packages (GET
	// /v1/environments), as a session's environment does.
	Environment string `json:"environment,omitempty"`
}

// File is a file with its content, base64 in JSON.
type File struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Mode    uint32 `json:"mode,omitempty"`
}

// RunResult is a one-shot run's result and the files it created or
// changed (each at most the server's artifact size limit; larger ones are
// listed in the result's artifacts without content).
type RunResult struct {
	Result CellResult `json:"result"`
	Files  []File     `json:"files"`
	Cached bool       `json:"cached,omitempty"` // from the cache (RunRequest.Cache), not run now
	// Packages is what RunRequest.Packages installed, with versions.
	Packages *PackageResult `json:"packages,omitempty"`
}

// FileInfo describes one workspace entry.
type FileInfo struct {
	Path    string    `json:"path"` // relative to the workspace
	Name    string    `json:"name"`
	Type    string    `json:"type"` // file, dir, symlink, other
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mtime"`
}

// FileList is a directory's entries, sorted by name.
type FileList struct {
	Path    string     `json:"path"`
	Entries []FileInfo `json:"entries"`
}

// MoveRequest renames a workspace entry (POST /v1/sessions/{id}/move).
type MoveRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// Uploaded answers an upload with what was written.
type Uploaded struct {
	Files []FileInfo `json:"files"`
}

// Language is one language the server runs.
type Language struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases,omitempty"`
	Kind    string   `json:"kind"` // repl, program
	Version string   `json:"version,omitempty"`
	// Available is false when the runtime is missing; Problem says why.
	Available bool   `json:"available"`
	Problem   string `json:"problem,omitempty"`
	// Packages are, for Python (pip) and JavaScript and TypeScript (npm),
	// the packages a session has before it installs any, read from the
	// server's host.
	Packages []PackageVersion `json:"packages,omitempty"`
}

// UserRequest creates a user (admins only).
type UserRequest struct {
	Name  string `json:"name"`
	Admin bool   `json:"admin,omitempty"`
}

// User is a person or program that owns sessions.
type User struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Admin   bool      `json:"admin"`
	Created time.Time `json:"created"`
}

// Quota is one budget: how much is used and the most allowed (0: no
// limit).
type Quota struct {
	Used  int64 `json:"used"`
	Limit int64 `json:"limit"`
}

// UserUsage is what a user has used of the per-user budgets, and the
// limits a session or run may ask for (GET /v1/users/{id}/usage). Past a
// budget the answer is 429 quota_exceeded; past a maximum, 403 forbidden.
type UserUsage struct {
	UserID string `json:"user_id"`
	// Sessions counts active sessions.
	Sessions Quota `json:"sessions"`
	// WorkspaceBytes adds up the active sessions' workspace limits.
	WorkspaceBytes Quota `json:"workspace_bytes"`
	// CPUSecondsToday is CPU time of cells and runs since 00:00 UTC.
	CPUSecondsToday Quota `json:"cpu_seconds_today"`
	// Renews is when the daily budgets start again.
	Renews time.Time `json:"renews"`
	// DefaultLimits is what a session or run gets when it asks for nothing.
	DefaultLimits Limits `json:"default_limits"`
	// MaxLimits is the most this user may ask for; an absent field has
	// only kiln's own range (always so for an admin).
	MaxLimits         Limits `json:"max_limits"`
	MaxIdleTTLSeconds int64  `json:"max_idle_ttl_seconds"`
}

// KeyRequest creates an API key.
type KeyRequest struct {
	Name string `json:"name,omitempty"`
	// ExpiresInSeconds or ExpiresAt (not both) makes a key that stops
	// working then; neither: the key works until revoked.
	ExpiresInSeconds int64      `json:"expires_in_seconds,omitempty"`
	ExpiresAt        *time.Time `json:"expires_at,omitempty"`
	// Scope "metrics" makes a key (of an admin) that may only read
	// GET /metrics, for Prometheus; empty: everything its user may do.
	Scope string `json:"scope,omitempty"`
}

// Key is an API key's record. Secret is set only in the answer that
// created it: the server keeps a hash and cannot show it again.
type Key struct {
	ID       string     `json:"id"`
	UserID   string     `json:"user_id"`
	Name     string     `json:"name"`
	Prefix   string     `json:"prefix"`
	Secret   string     `json:"secret,omitempty"`
	Created  time.Time  `json:"created"`
	LastUsed *time.Time `json:"last_used,omitempty"`
	Revoked  *time.Time `json:"revoked,omitempty"`
	Expires  *time.Time `json:"expires,omitempty"` // absent: never
	Scope    string     `json:"scope,omitempty"`   // absent: everything its user may do
}

// Problem is every error answer (application/problem+json, RFC 9457).
// Code is stable; Detail is safe to show a user.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Code      string `json:"code"`
	Detail    string `json:"detail"`
	RequestID string `json:"request_id,omitempty"`
	// RetryAfterSeconds is set with 429 and 503 (also as Retry-After).
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
}

func (p *Problem) Error() string { return p.Detail + " (" + p.Code + ")" }

// AuditEntry is one record of the append-only audit log (GET /v1/audit).
type AuditEntry struct {
	ID          string          `json:"id"`
	Time        time.Time       `json:"time"`
	UserID      string          `json:"user_id"`
	Action      string          `json:"action"` // e.g. execution, file.write, session.create, egress
	SessionID   string          `json:"session_id,omitempty"`
	ExecutionID string          `json:"execution_id,omitempty"`
	CodeHash    string          `json:"code_hash,omitempty"`
	Outcome     string          `json:"outcome,omitempty"`
	Detail      json.RawMessage `json:"detail,omitempty"`
	// Actor is who acted, where a user did; in a shared session UserID
	// is the owner, who is charged, and Actor the collaborator.
	Actor string `json:"actor,omitempty"`
}

// AuditList is one page of the audit log, oldest first.
type AuditList struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor string       `json:"next_cursor,omitempty"`
}
