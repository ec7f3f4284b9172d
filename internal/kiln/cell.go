package kiln

import "encoding/json"

// CellStatus says how a cell ended.
type CellStatus string

const (
	StatusOK          CellStatus = "ok"
	StatusError       CellStatus = "error"
	StatusTimeout     CellStatus = "timeout"
	StatusInterrupted CellStatus = "interrupted"
	StatusMemory      CellStatus = "memory_limit"
	StatusOutput      CellStatus = "output_limit"
)

// Output is one rich output of a cell: a MIME bundle (text/plain always;
// text/html, text/markdown, image/png as base64, image/svg+xml,
// application/json when available).
type Output struct {
	Data     map[string]json.RawMessage `json:"data"`
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
	// Result marks the value of the cell's last expression.
	Result bool `json:"execute_result,omitempty"`
}

// CellError is what ended a cell with an error: an exception with a
// traceback whose line numbers point into the cell, or a failed
// compilation with its diagnostics.
type CellError struct {
	Name        string       `json:"name"`
	Message     string       `json:"message"`
	Traceback   []string     `json:"traceback,omitempty"`
	Line        int          `json:"line,omitempty"`
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// Diagnostic is one compiler message.
type Diagnostic struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column,omitempty"`
	Severity string `json:"severity"` // error, warning
	Message  string `json:"message"`
}

// Artifact is a workspace file that a cell created, changed or deleted.
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Change string `json:"change"` // created, modified, deleted
}

// CellResult is everything a cell produced, the same for every language.
type CellResult struct {
	Language  string     `json:"language"`
	Status    CellStatus `json:"status"`
	Stdout    string     `json:"stdout"`
	Stderr    string     `json:"stderr"`
	Outputs   []Output   `json:"outputs"`
	Error     *CellError `json:"error,omitempty"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	Usage     Usage      `json:"usage"`
	Artifacts []Artifact `json:"artifacts"`
	// Notice is a plain-words remark about the session, e.g. that the
	// kernel was restarted and its state lost.
	Notice string `json:"notice,omitempty"`
	// Diagnostics of a program language whose build succeeded: the
	// compiler's warnings, kept out of Stderr, which is the program's own.
	// A failed build's are in Error.
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	// BuildUsage is what building a program cost, apart from its run
	// (Usage); nil when nothing was built (a cached build, a REPL cell).
	BuildUsage *Usage `json:"build_usage,omitempty"`
	// Tests, when the program ran as its tests (Go's Test functions, Rust's
	// #[test]s), are what each test did, parsed from the runner's output.
	Tests *TestReport `json:"tests,omitempty"`
	// Egress is the sandbox's connection attempts through kiln's egress
	// proxy during the cell (at most MaxCellEgress; the audit log has
	// all), allowed or denied.
	Egress []EgressRecord `json:"egress,omitempty"`
}

// TestReport counts a test run's cases and lists them in the order they
// ended.
type TestReport struct {
	Passed  int        `json:"passed"`
	Failed  int        `json:"failed"`
	Skipped int        `json:"skipped"`
	Cases   []TestCase `json:"cases"`
}

// TestCase is one test: its name as the runner gives it (TestAdd/sub,
// tests::adds), "passed", "failed" or "skipped", and for a failure or a
// skip what it logged (bounded).
type TestCase struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}
