package protocol

// Terminal messages: an interactive shell on a pseudo-terminal in the
// sandbox. Every message of one terminal carries the id of its
// TTermOpen request.
const (
	TTermOpen   = "term_open"   // body TermOpen; events: started, term_output*, exit | error
	TTermInput  = "term_input"  // body Data: keystrokes for the terminal (same id)
	TTermResize = "term_resize" // body TermSize (same id)
	TTermAck    = "term_ack"    // body TermAck: output the service has passed on (same id)
	TTermClose  = "term_close"  // no body: hang up and kill the terminal's processes (same id)
	TTermOutput = "term_output" // body Data: what the terminal printed
)

// TermWindow is how much terminal output the agent sends ahead of the
// service's TTermAck: past it, the agent stops reading the terminal, and
// the shell blocks on its writes until the service catches up. Neither side
// ever holds more than this of one terminal's output.
const TermWindow = 256 << 10

// TermWindowChunks bounds the term_output messages in flight the same way:
// a pty gives small reads, and the client's queue for one request holds
// a fixed number of messages (agentclient), which a terminal must never
// fill, or it would stall every other request on the connection.
const TermWindowChunks = 16

// MaxTerminals bounds the terminals open at once in one sandbox.
const MaxTerminals = 4

// TermMaxInput bounds the keystrokes the agent keeps for a terminal that
// is not reading them; input past it is dropped (as a full tty input
// queue drops it) rather than queued without bound.
const TermMaxInput = 64 << 10

// TermOpen starts a shell on a new pseudo-terminal, as the unprivileged
// user, in the workspace.
type TermOpen struct {
	Argv []string `json:"argv,omitempty"` // default: /bin/bash -i
	Env  []string `json:"env,omitempty"`  // KEY=VALUE, added to the sandbox's base environment
	TermSize
}

// TermSize is a terminal's size in character cells.
type TermSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// TermAck returns output credit: Chunks term_output messages holding Bytes
// have been passed on.
type TermAck struct {
	Bytes  int64 `json:"bytes"`
	Chunks int   `json:"chunks"`
}
