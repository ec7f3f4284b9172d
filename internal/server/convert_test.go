package server

import (
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestHugeTimeoutIsRefused: a timeout_ms so large that it would wrap
// around to about one second in nanoseconds is refused as out of range,
// for a cell and for a session's or run's limits alike.
func TestHugeTimeoutIsRefused(t *testing.T) {
	const wraps = 18446744074710 // * 1e6 ns is 2^64 + about 1 s
	cell, err := cellRequest(client.ExecRequest{Language: "python", Code: "1", TimeoutMS: wraps})
	if err == nil {
		_, err = engine.CheckCell(cell, engine.DefaultCellBounds())
	}
	if kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("a cell with timeout_ms %d: %v (timeout %v); want invalid", int64(wraps), err, cell.Timeout)
	}
	if err := toLimits(client.Limits{TimeoutMS: wraps}).Validate(); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("limits with timeout_ms %d: %v; want invalid", int64(wraps), err)
	}
}
