package protocol

import "encoding/json"

// Cells run in REPL kernels that live as long as the sandbox (or until
// restarted). One cell runs at a time per kernel. A cell started with
// StdinOpen takes TStdin messages (body Stdin, the cell's id) as an exec
// does; see Cell.
const (
	TCell     = "cell"     // body Cell; events: stdout, stderr, display, cell_error, input_request, cell_done | error
	TRestart  = "restart"  // body Restart; answered ok once the kernel(s) are gone
	TComplete = "complete" // body KernelQuery; answered ok with the kernel's Completion as body
	TCheck    = "check"    // body KernelQuery; answered ok with the kernel's CheckResult as body

	TDisplay   = "display"    // body: a kernelproto.Display (display or execute_result), as the kernel sent it
	TCellError = "cell_error" // body: a kernelproto.Error, as the kernel sent it
	TCellDone  = "cell_done"  // body CellDone; the last event of a cell
	// TInputRequest says the cell's code waits for open stdin and the
	// agent has none queued, so that a client can ask its user.
	TInputRequest = "input_request" // body InputRequest
)

// InputRequest is the body of TInputRequest. Prompt is the cell's output
// since its last newline or its last read of stdin (on stdout or stderr,
// whichever it wrote last), at most MaxPrompt bytes: what input("Name: ")
// printed. That output has been sent as stdout or stderr events already.
type InputRequest struct {
	Prompt   string `json:"prompt"`
	Password bool   `json:"password,omitempty"` // a secret: do not echo it
}

// MaxPrompt bounds InputRequest.Prompt; a longer one keeps its end.
const MaxPrompt = 1 << 10

// Kernel says how to start a language's kernel if it is not running. The
// agent remembers it: later requests may leave Argv and Env empty. Source,
// when set, is written to the kernel's fd 3 as soon as it starts, before
// its Ready: Argv is then a loader that reads the kernel's source from
// there (kernels.Spec.Boot), so that the source is not on the command
// line.
type Kernel struct {
	Language string   `json:"language"`
	Argv     []string `json:"argv"`
	Env      []string `json:"env,omitempty"`
	Source   string   `json:"source,omitempty"`
}

// Cell runs code in a kernel. Signal (SIGINT) with the cell's id
// interrupts it; Cancel interrupts it and, if it does not stop within a
// grace period, kills the kernel.
//
// Stdin: with neither HasStdin nor StdinOpen, reading stdin fails at once.
// HasStdin gives the cell Stdin and then end of file. StdinOpen says more
// input follows in TStdin messages with the cell's id, after Stdin if any,
// until one says EOF; the kernel asks for it as the cell's code reads
// (kernelproto's pull). Input the cell has not asked for yet waits in the
// agent, up to MaxPendingStdin bytes; past that it is dropped, and the
// cell's next read past what was kept fails with an error that says so.
type Cell struct {
	Kernel    Kernel `json:"kernel"`
	Code      string `json:"code"`
	Stdin     string `json:"stdin,omitempty"`
	HasStdin  bool   `json:"has_stdin,omitempty"`
	StdinOpen bool   `json:"stdin_open,omitempty"`
	// Argv, when not empty, is the cell's command line as a script's
	// (kernelproto.Execute.Argv): a one-shot run's program name and
	// arguments.
	Argv []string `json:"argv,omitempty"`
	// Warmup marks a cell that only starts the kernel (the warm pool's):
	// it takes no cell number (kernelproto.Execute.Warmup).
	Warmup      bool  `json:"warmup,omitempty"`
	TimeoutMs   int64 `json:"timeout_ms"`
	OutputBytes int64 `json:"output_bytes"`
}

// MaxPendingStdin bounds the input a running exec or cell with open stdin
// has been sent but not read yet. An exec whose input overflows gets end of
// file after what was kept, and a note on its stderr.
const MaxPendingStdin = 16 << 20

// Restart kills the kernel of Language, or every kernel if it is empty.
// The workspace is kept; the next cell starts a fresh kernel.
type Restart struct {
	Language string `json:"language,omitempty"`
}

// KernelQuery asks a kernel about code without running it.
type KernelQuery struct {
	Kernel Kernel `json:"kernel"`
	Code   string `json:"code"`
	Cursor int    `json:"cursor,omitempty"` // for complete
}

// Cell statuses, as the result model names them.
const (
	CellOK          = "ok"
	CellError       = "error"
	CellTimeout     = "timeout"
	CellInterrupted = "interrupted"
	CellMemory      = "memory_limit"
	CellOutput      = "output_limit"
)

// CellDone ends a cell.
type CellDone struct {
	Status      string     `json:"status"`
	ExitCode    *int       `json:"exit_code,omitempty"`
	WallNs      int64      `json:"wall_ns"`
	CPUNs       int64      `json:"cpu_ns"`
	PeakMemory  int64      `json:"peak_memory_bytes"`
	OutputBytes int64      `json:"output_bytes"`
	Artifacts   []Artifact `json:"artifacts,omitempty"`
	// KernelLost says the kernel died or was killed; its state is gone and
	// the next cell starts a new one. Reason says why, in plain words.
	KernelLost bool   `json:"kernel_lost,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// PidsLimited says the cell's processes ran into the pids limit.
	PidsLimited bool `json:"pids_limited,omitempty"`
	// Kernel carries the kernel's Ready message the first time a cell
	// starts it.
	Kernel json.RawMessage `json:"kernel,omitempty"`
}

// Artifact is a workspace file a cell created, changed or deleted.
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Change string `json:"change"` // created, modified, deleted
}
