package engine

import (
	"cmp"
	"context"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/programs"
)

// DefaultCellBounds are the most the engine runs: a caller's bounds are
// cut to these.
func DefaultCellBounds() kiln.CellBounds {
	return kiln.CellBounds{MaxCodeBytes: MaxCodeBytes, MaxStdinBytes: MaxStdinBytes}
}

// CheckedCell is a cell that passed CheckCell. Only CheckCell makes one,
// so a cell is validated once, against the bounds its caller passed in,
// and the service can refuse it before it waits in the queue.
type CheckedCell struct {
	req  kiln.CellRequest
	lang *lang.Language
	// script: a one-shot run's cell (PrepareRun), which a kernel runs as a
	// script: with its arguments as argv, ending with sys.exit's status.
	script bool
}

// Request is the checked cell, its language named by its canonical name.
func (c CheckedCell) Request() kiln.CellRequest { return c.req }

// CheckCell is the one validation of a cell: its language exists and is
// installed, and its code, stdin and timeout are within b (and within the
// engine's own bounds). The language must be named; a session's default
// is the caller's to fill in.
func CheckCell(c kiln.CellRequest, b kiln.CellBounds) (CheckedCell, error) {
	l, err := lang.Lookup(c.Language)
	if err != nil {
		return CheckedCell{}, err
	}
	if err := l.Available(); err != nil {
		return CheckedCell{}, err
	}
	c.Language = l.Name
	d := DefaultCellBounds()
	b.MaxCodeBytes = min(positiveOr(b.MaxCodeBytes, d.MaxCodeBytes), d.MaxCodeBytes)
	b.MaxStdinBytes = min(positiveOr(b.MaxStdinBytes, d.MaxStdinBytes), d.MaxStdinBytes)
	if err := c.Check(b); err != nil {
		return CheckedCell{}, err
	}
	if len(c.BuildOptions) > 0 {
		if _, err := programs.CheckBuildOptions(l, c.BuildOptions); err != nil {
			return CheckedCell{}, err
		}
	}
	return CheckedCell{req: c, lang: l}, nil
}

func positiveOr(v, d int64) int64 {
	if v <= 0 {
		return d
	}
	return v
}

// RunChecked runs a checked cell and returns its result. The error is
// non-nil only when the cell could not run at all (a closed session, a
// broken sandbox); how the cell itself ended is in the result's Status.
func (s *Session) RunChecked(ctx context.Context, c CheckedCell, ev Events) (kiln.CellResult, error) {
	if c.lang == nil {
		return kiln.CellResult{}, kiln.Errorf(kiln.Internal, "a cell was run without being checked")
	}
	select {
	case <-s.closed:
		return kiln.CellResult{}, kiln.Errorf(kiln.Invalid, "the session is closed")
	default:
	}
	s.run.Lock()
	defer s.run.Unlock()
	if c.lang.Kind == lang.REPL && !programs.IsScriptTest(c.lang.Name, cmp.Or(c.req.Entry, c.req.Name), c.req.Test) {
		return s.runREPL(ctx, c.lang, c.req, ev, c.script)
	}
	return s.runProgram(ctx, c.lang, c.req, ev)
}
