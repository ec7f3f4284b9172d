package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestReportNamesLimitsAndLostState: the CLI prints the result's notice,
// which names the limit and what became of the kernel's state; a result
// without one still names its limit, and a memory kill says the state is
// lost.
func TestReportNamesLimitsAndLostState(t *testing.T) {
	for _, tc := range []struct {
		res  kiln.CellResult
		want []string
	}{
		{kiln.CellResult{Status: kiln.StatusMemory, Notice: "memory limit reached: the cell needed more than the session's 128 MiB and was killed; the python kernel was killed and is restarted with the next cell: its state (variables, imports, definitions) is lost"},
			[]string{"kiln: memory limit reached", "state", "lost"}},
		{kiln.CellResult{Status: kiln.StatusMemory}, []string{"kiln: memory limit reached", "state is lost"}},
		{kiln.CellResult{Status: kiln.StatusTimeout, Notice: "time limit reached: the cell ran longer than 1s and was stopped; the kernel kept its state"},
			[]string{"kiln: time limit reached: the cell ran longer than 1s"}},
		{kiln.CellResult{Status: kiln.StatusOutput}, []string{"kiln: output limit reached"}},
	} {
		var out, errb bytes.Buffer
		(&renderer{stdout: &out, stderr: &errb}).report(tc.res)
		for _, w := range tc.want {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("%s result with notice %q: the CLI printed %q; want it to say %q", tc.res.Status, tc.res.Notice, errb.String(), w)
			}
		}
		if strings.Count(errb.String(), "limit reached") > 1 {
			t.Errorf("the limit is named twice: %q", errb.String())
		}
	}
}
