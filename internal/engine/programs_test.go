package engine

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/programs"
)

// TestCompileErrorMessage: a linker's error has a file and no line; the
// message names the file without a line 0.
func TestCompileErrorMessage(t *testing.T) {
	for _, tt := range []struct {
		d    kiln.Diagnostic
		want string
	}{
		{kiln.Diagnostic{File: "main.c", Severity: "error", Message: "undefined reference to `f'"}, "main.c: undefined reference to `f'"},
		{kiln.Diagnostic{File: "sol.c", Line: 2, Severity: "error", Message: "'y' undeclared"}, "sol.c:2: 'y' undeclared"},
		{kiln.Diagnostic{Severity: "error", Message: "the compiler was stopped"}, "the compiler was stopped"},
	} {
		e := compileError(programs.Result{Phase: programs.PhaseCompile, Diagnostics: []kiln.Diagnostic{tt.d}})
		if e.Message != tt.want || strings.Contains(e.Message, ":0:") {
			t.Errorf("compileError(%+v).Message = %q, want %q", tt.d, e.Message, tt.want)
		}
	}
}
