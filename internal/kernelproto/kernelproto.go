// Package kernelproto is the protocol between the agent and a REPL kernel
// (Python, JavaScript, TypeScript, bash, SQL) running inside a sandbox.
//
// A kernel is an ordinary user process with one extra descriptor: fd 3, a
// unix stream socket to the agent. Over it both sides send newline-delimited
// JSON objects, one message per line, each at most MaxLine bytes. The
// kernel's own stdout and stderr (fds 1 and 2) are pipes the agent reads and
// attributes to the cell that is running; its stdin (fd 0) is empty (see
// Stdin below). A kernel runs one cell at a time.
//
// A kernel started through a loader (kernels.Spec.Boot) first reads its
// own source from fd 3: a header line of byte lengths, then the parts. The
// kernel then speaks first, with Ready. Then:
//
//	agent → kernel   {"type":"execute","cell":"c1","code":"1+1"}
//	kernel → agent   {"type":"execute_result","cell":"c1","data":{"text/plain":"2"}}
//	kernel → agent   {"type":"done","cell":"c1","status":"ok"}
//
// Before sending Done a kernel flushes its stdout and stderr, so that all of
// a cell's output is in the pipes (or on the channel) when the agent learns
// the cell is over.
//
// # Ordered output
//
// A kernel may send the cell's language-level output (Python's sys.stdout
// and sys.stderr) as Stream messages on the channel, so that it keeps its
// order with displays, which take the same path. Output written to fds 1
// and 2 below the language (a child process, C code, os.write(1, ...))
// still goes through the pipes. To keep the order of the two paths, such a
// kernel announces a random Ready.Order (hex of OrderNonceLen bytes) and
// numbers its ordered messages (Stream, Display, Error; an execute_result
// that goes out in one write with Done may be left unnumbered) with Seq,
// 1, 2, 3, ...; before it sends message N it writes the order
// mark of N (the nonce, then N as 8 bytes big-endian: OrderMarkLen bytes
// in one write) to both pipes. The agent strips the marks, forwards what
// the pipes held before mark N before it forwards message N, and what came
// after the mark after it. Both waits are bounded: marks are only a hint
// of order (user code can forge them), never a reason to hang or to drop
// output.
//
// Interrupt is SIGINT to the kernel's process group, sent by the agent: the
// kernel stops the running cell (Python raises KeyboardInterrupt in it),
// keeps its state, and answers Done with status "interrupted". A kernel
// that does not answer within a grace period is killed and restarted.
//
// Binary display data (image/png) is base64 text, as in Jupyter's
// protocol; JSON data (application/json) is embedded as JSON.
//
// # Stdin
//
// A cell's stdin is one of three things, chosen by its Execute:
//
//   - none (the default): reading stdin fails at once with a clear error;
//   - fixed (HasStdin): reads return Execute.Stdin, then end of file;
//   - open (StdinOpen): input arrives while the cell runs, pulled by the
//     kernel when user code reads.
//
// Open stdin is a pull: when user code reads and the kernel has nothing
// buffered, the kernel sends StdinRequest and waits for the agent's Stdin
// answer, which comes once there is input (or end of file) for the cell:
//
//	kernel → agent   {"type":"stdin_request","cell":"c1"}
//	agent → kernel   {"type":"stdin","cell":"c1","data":"YWRhCg=="}
//	kernel → agent   {"type":"stdin_request","cell":"c1"}
//	agent → kernel   {"type":"stdin","cell":"c1","eof":true}
//
// The agent answers requests one at a time and in order, each with at most
// MaxStdinChunk bytes. A request carries no prompt: a kernel writes the
// prompt to its stdout and flushes it before asking (Python's input()
// does), so the client sees it in the cell's output, in order, before it
// is expected to type. Input that the service sends before the kernel asks
// waits in the agent, bounded; past the bound the answer carries Error and
// the kernel makes the read fail with it. The wait is interruptible: SIGINT
// stops the cell as it would any other wait, and the kernel keeps its
// state. An answer that arrives after its cell ended (the cell stopped
// while the answer was on the way) comes before the next Execute; kernels
// drop Stdin messages outside a cell. A kernel that pulls ahead of user code
// (bash feeds a pipe) sends its next request only when it has passed on the
// last answer, and marks its requests Ahead.
//
// A request that is not Ahead means user code waits for input: when the
// agent has none queued, it tells the client that input is wanted
// (protocol.TInputRequest), with the prompt, the cell's output since its
// last newline or its last read. That is why a kernel flushes before it
// asks. A kernel that asks ahead says StdinWait when it knows that user
// code waits (bash's read builtin).
//
// Raw reads of fd 0 read the cell's stdin too, from the same buffer as the
// language's stdin object: os.read(0, n) in Python, fs.readSync(0) and
// fs.readFileSync(0) in Node.js. The kernel's real fd 0 stays empty, so a
// child process or C code that reads it sees end of file.
package kernelproto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
)

// MaxLine bounds one message, images included.
const MaxLine = 32 << 20

// ChannelFD is the kernel's descriptor for the agent's socket.
const ChannelFD = 3

// Message types, agent to kernel.
const (
	TExecute  = "execute"  // Execute
	TComplete = "complete" // Complete
	TCheck    = "check"    // Check
	TStdin    = "stdin"    // Stdin: the answer to a StdinRequest
)

// Message types, kernel to agent.
const (
	TReady         = "ready"          // Ready, once, first
	TDisplay       = "display"        // Display: display(), plots, rich reprs
	TExecuteResult = "execute_result" // Display: the value of the cell's last expression
	TError         = "error"          // Error: the cell raised
	TDone          = "done"           // Done: the cell is over
	TCompletion    = "completion"     // Completion: answer to Complete
	TCheckResult   = "check_result"   // CheckResult: answer to Check
	TStdinRequest  = "stdin_request"  // StdinRequest: the running cell reads open stdin
	TStdinWait     = "stdin_wait"     // StdinWait: the running cell waits for open stdin asked ahead
	TStream        = "stream"         // Stream: language-level stdout or stderr of the running cell
)

// Order marks (see the package doc).
const (
	OrderNonceLen = 16
	OrderMarkLen  = OrderNonceLen + 8
)

// MaxStreamChunk bounds the data of one Stream message.
const MaxStreamChunk = 1 << 20

// Stream is a chunk of the running cell's stdout (Name "stdout") or stderr
// ("stderr"), sent on the channel so that it keeps its order with the
// cell's displays. Data is base64 in JSON, so any bytes pass.
type Stream struct {
	Type string `json:"type"`
	Cell string `json:"cell"`
	Seq  uint64 `json:"seq,omitempty"`
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// MaxStdinChunk bounds the data of one Stdin answer.
const MaxStdinChunk = 1 << 20

// Envelope is what every message has; decode it first, then the whole line
// into the type it names.
type Envelope struct {
	Type string `json:"type"`
	Cell string `json:"cell,omitempty"`
	// Seq numbers an ordered message of a kernel that announced
	// Ready.Order (see Ordered output in the package doc); 0 otherwise.
	Seq uint64 `json:"seq,omitempty"`
}

// Ready is the kernel's first message.
type Ready struct {
	Type     string `json:"type"`
	Language string `json:"language"`
	Version  string `json:"version"` // of the language runtime
	// Order, when set, is the hex nonce of the kernel's order marks: it
	// numbers its ordered messages and marks the pipes (see the package
	// doc).
	Order string `json:"order,omitempty"`
}

// OrderMark returns the order mark of message seq for nonce.
func OrderMark(nonce []byte, seq uint64) []byte {
	m := append(append([]byte(nil), nonce...), make([]byte, 8)...)
	binary.BigEndian.PutUint64(m[len(nonce):], seq)
	return m
}

// OrderSplit finds the first order mark of nonce in data: it returns the
// bytes before it, its number, and the bytes after it. Without a whole
// mark, found is false and keep is how many bytes at the end of data could
// be the start of one: hold them back until more arrive.
func OrderSplit(nonce, data []byte) (before []byte, seq uint64, after []byte, found bool, keep int) {
	if i := bytes.Index(data, nonce); i >= 0 {
		if len(data)-i < len(nonce)+8 {
			return data[:i], 0, nil, false, len(data) - i
		}
		return data[:i], binary.BigEndian.Uint64(data[i+len(nonce):]), data[i+len(nonce)+8:], true, 0
	}
	for k := min(len(nonce)-1, len(data)); k > 0; k-- {
		if bytes.HasPrefix(nonce, data[len(data)-k:]) {
			return data[:len(data)-k], 0, nil, false, k
		}
	}
	return data, 0, nil, false, 0
}

// Execute runs a cell.
type Execute struct {
	Type string `json:"type"`
	Cell string `json:"cell"`
	Code string `json:"code"`
	// Stdin is what the cell's reads from standard input (input(),
	// sys.stdin, readline) return. When HasStdin and StdinOpen are false,
	// reading stdin in the cell fails at once with a clear error instead of
	// blocking.
	Stdin    string `json:"stdin,omitempty"`
	HasStdin bool   `json:"has_stdin,omitempty"`
	// StdinOpen says the cell's stdin arrives while it runs: reads send
	// StdinRequest (see the package doc). Stdin and HasStdin are unused then.
	StdinOpen bool `json:"stdin_open,omitempty"`
	// Argv, when not empty, is the command line the cell's code sees, as a
	// script run with arguments does: the program's name, then its
	// arguments (Python's sys.argv, process.argv after node's path, bash's
	// $@ after $0). It marks a one-shot run's cell, which runs as a script:
	// Python's sys.exit() gives the cell's exit_code instead of an error.
	// A kernel keeps it for later cells.
	Argv []string `json:"argv,omitempty"`
	// Warmup marks a cell that only starts the kernel (the warm pool's):
	// it runs as any other but takes no number, so that the user's first
	// cell is still "<cell 1>" in tracebacks.
	Warmup bool `json:"warmup,omitempty"`
}

// StdinRequest asks for more of the running cell's open stdin. Ahead says
// the kernel asks before user code reads (bash feeds a pipe): the agent
// answers it as any other, but does not tell the client that input is
// wanted.
type StdinRequest struct {
	Type  string `json:"type"`
	Cell  string `json:"cell"`
	Ahead bool   `json:"ahead,omitempty"`
	// Password says the code reads a secret (Python's getpass): a UI
	// should not echo it.
	Password bool `json:"password,omitempty"`
}

// StdinWait says that user code waits for open stdin and the kernel has
// nothing buffered, from a kernel that asks ahead (bash's read): the agent
// tells the client as for a request that is not Ahead, and answers
// nothing.
type StdinWait struct {
	Type     string `json:"type"`
	Cell     string `json:"cell"`
	Password bool   `json:"password,omitempty"` // read -s
}

// Stdin answers a StdinRequest with at least one byte of Data, or EOF
// (stdin is closed: reads return end of file from now on), or Error (input
// was lost: the read fails with this message, and stdin is closed). Data
// is base64 in JSON, so any bytes pass.
type Stdin struct {
	Type  string `json:"type"`
	Cell  string `json:"cell"`
	Data  []byte `json:"data,omitempty"`
	EOF   bool   `json:"eof,omitempty"`
	Error string `json:"error,omitempty"`
}

// Display is a rich output: a MIME bundle keyed by MIME type. Kernels send
// text/plain always, and any of text/html, text/markdown, image/png,
// image/svg+xml, application/json when the object has them.
type Display struct {
	Type     string                     `json:"type"`
	Cell     string                     `json:"cell"`
	Data     map[string]json.RawMessage `json:"data"`
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
}

// Error describes an exception that ended a cell. Line numbers in
// Traceback point into the cell's code; the kernel's own frames are removed.
type Error struct {
	Type      string   `json:"type"`
	Cell      string   `json:"cell"`
	Name      string   `json:"name"`    // e.g. ZeroDivisionError, SyntaxError
	Message   string   `json:"message"` // e.g. division by zero
	Traceback []string `json:"traceback"`
	Line      int      `json:"line,omitempty"` // line in the cell where it was raised, if known
}

// Done ends a cell. Status is StatusOK, StatusError or StatusInterrupted.
// ExitCode is set by kernels whose cells have one (bash: the status of the
// cell's last command; Python: sys.exit()'s).
type Done struct {
	Type     string `json:"type"`
	Cell     string `json:"cell"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// Cell statuses a kernel reports.
const (
	StatusOK          = "ok"
	StatusError       = "error"
	StatusInterrupted = "interrupted"
)

// Complete asks for completions of the name before Cursor, an offset into
// Code counted in Unicode code points (as Jupyter does).
type Complete struct {
	Type   string `json:"type"`
	Cell   string `json:"cell"`
	Code   string `json:"code"`
	Cursor int    `json:"cursor"`
}

// Completion answers Complete: Matches replace Code[CursorStart:CursorEnd].
type Completion struct {
	Type        string   `json:"type"`
	Cell        string   `json:"cell"`
	Matches     []string `json:"matches"`
	CursorStart int      `json:"cursor_start"`
	CursorEnd   int      `json:"cursor_end"`
}

// Check asks whether Code is complete and valid without running it.
type Check struct {
	Type string `json:"type"`
	Cell string `json:"cell"`
	Code string `json:"code"`
}

// CheckResult answers Check. Status is "complete" (valid, ready to run),
// "incomplete" (more lines expected, e.g. an open block) or "invalid"
// (a syntax error at Line:Column, both 1-based).
type CheckResult struct {
	Type    string `json:"type"`
	Cell    string `json:"cell"`
	Status  string `json:"status"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message,omitempty"`
}
