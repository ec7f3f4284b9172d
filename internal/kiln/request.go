package kiln

import (
	"io"
	"time"
	"unicode/utf8"
)

// CellRequest is one cell, the same type from every front end (HTTP, the
// WebSocket, MCP, the REPL) through the service to the engine. Only the
// wire formats to the agent and the kernels, which cross a process
// boundary, have types of their own.
type CellRequest struct {
	Language string // "": the session's first language
	Code     string
	Stdin    *string // nil: reading stdin fails at once with a clear error
	// StdinStream, when set, is the cell's stdin, read from as the code asks
	// for input (a Python input() waits for it); io.EOF, or any other
	// error, closes the cell's stdin. Stdin is ignored then. It is read in
	// chunks on a goroutine of its own, only while the cell runs; a Read
	// still blocked when the cell ends is abandoned (what it returns later
	// is dropped), so it never delays the end of the cell. Input sent
	// before the code reads waits in the sandbox, up to 16 MiB. Program
	// cells feed it to the program's run, never to its build. The Node.js
	// kernel serves it on process.stdin; SQL cells never read stdin.
	StdinStream io.Reader
	Timeout     time.Duration // 0: the session's limit
	Args        []string      // program languages: the program's arguments
	// Warmup marks a cell that only starts a kernel (the warm pool's): it
	// takes no cell number, so the user's first cell is "<cell 1>".
	Warmup bool
	// Name is, for a program language, the file name of Code (sol.c,
	// test.java): diagnostics name it. Code is built outside the
	// workspace, never written into it. Default main<ext>.
	Name string
	// Entry, for a program language, runs the program in the workspace
	// whose entry file this is (a multi-file project), instead of Code,
	// which must be empty.
	Entry string
	// BuildOptions are, for a compiled language, the run's own compiler
	// and linker flags (-O2, -std=c++17, -lcrypto), checked against the
	// toolchain's allowlist (internal/programs/options.go).
	BuildOptions []string
	// Test runs the code as tests: a Python file with pytest, JavaScript
	// with node --test, Rust with rustc --test. Test files are also found
	// by name (test_*.py, *_test.py, *.test.js, *_test.go).
	Test bool
}

// CellBounds are the sizes a cell may have. The caller passes its own:
// the service its configured ones (--max-code), the CLI the engine's.
type CellBounds struct {
	MaxCodeBytes  int64
	MaxStdinBytes int64
}

// Check is the part of a cell's validation that needs no language
// registry: the code's and stdin's sizes against b, UTF-8, the timeout.
func (c CellRequest) Check(b CellBounds) error {
	if n := int64(len(c.Code)); n > b.MaxCodeBytes {
		return Errorf(TooLarge, "the code is %s, over the %s allowed", FormatBytes(n), FormatBytes(b.MaxCodeBytes))
	}
	if !utf8.ValidString(c.Code) {
		return Errorf(Invalid, "the code is not valid UTF-8")
	}
	if c.Stdin != nil && int64(len(*c.Stdin)) > b.MaxStdinBytes {
		return Errorf(TooLarge, "stdin is %s, over the %s allowed", FormatBytes(int64(len(*c.Stdin))), FormatBytes(b.MaxStdinBytes))
	}
	if c.Timeout < 0 {
		return Errorf(Invalid, "the timeout must not be negative; 0 means the session's")
	}
	if c.Timeout != 0 {
		return Limits{Timeout: c.Timeout}.Validate()
	}
	return nil
}

// CellEvents receive a cell's output as it happens; any may be nil. They
// are called from one goroutine, in order.
type CellEvents struct {
	Stdout func([]byte)
	Stderr func([]byte)
	Output func(Output)
	// Input says that a session cell with StdinStream waits for input it
	// has not been sent, with the prompt (the output since its last
	// newline or read, already passed to Stdout or Stderr); password says
	// the input is a secret (getpass, read -s), not to be echoed.
	Input func(prompt string, password bool)
}
