package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestCheckCellUsesTheCallersBounds: a cell is checked once, against the
// bounds its caller passes (the server's --max-code), never above the
// engine's own; what is wrong is named with the limit.
func TestCheckCellUsesTheCallersBounds(t *testing.T) {
	b := kiln.CellBounds{MaxCodeBytes: 100, MaxStdinBytes: 10}
	long := "print(1)\n" + strings.Repeat("#", 200)
	if _, err := CheckCell(kiln.CellRequest{Language: "python", Code: long}, b); kiln.KindOf(err) != kiln.TooLarge || !strings.Contains(err.Error(), "100 bytes") {
		t.Errorf("code over the caller's bound: %v, want too_large naming 100 bytes", err)
	}
	in := strings.Repeat("x", 11)
	if _, err := CheckCell(kiln.CellRequest{Language: "python", Code: "1", Stdin: &in}, b); kiln.KindOf(err) != kiln.TooLarge || !strings.Contains(err.Error(), "10 bytes") {
		t.Errorf("stdin over the caller's bound: %v, want too_large naming 10 bytes", err)
	}
	huge := kiln.CellBounds{MaxCodeBytes: 1 << 40, MaxStdinBytes: 1 << 40}
	if _, err := CheckCell(kiln.CellRequest{Language: "python", Code: strings.Repeat("#", MaxCodeBytes+1)}, huge); kiln.KindOf(err) != kiln.TooLarge {
		t.Errorf("code over the engine's own bound with a larger caller bound: %v, want too_large", err)
	}
	for _, bad := range []kiln.CellRequest{
		{Language: "cobol", Code: "1"},
		{Language: "python", Code: "\xff"},
		{Language: "python", Code: "1", Timeout: -time.Second},
		{Language: "python", Code: "1", Timeout: 25 * time.Hour},
	} {
		if _, err := CheckCell(bad, b); kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("%+v: %v, want invalid", bad, err)
		}
	}
	c, err := CheckCell(kiln.CellRequest{Language: "Python", Code: "print(1)"}, b)
	if err != nil || c.Request().Language != "python" {
		t.Errorf("a good cell: %+v, %v; want accepted with its language's canonical name", c.Request(), err)
	}
}
