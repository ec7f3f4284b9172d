package kiln

import (
	"encoding/json"
	"strings"
	"testing"
)

// A result with no run behind it, as recovery after a restart makes,
// still has the lists the API promises.
func TestCellResultListsAreNeverNull(t *testing.T) {
	for _, r := range []CellResult{
		{Language: "python", Status: StatusInterrupted, Notice: "the server restarted"},
		{Outputs: []Output{}, Artifacts: []Artifact{}},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"outputs":[]`, `"artifacts":[]`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s: want %s", b, want)
			}
		}
	}
	// Through a pointer too, as in an Execution's result.
	b, _ := json.Marshal(struct{ R *CellResult }{&CellResult{}})
	if !strings.Contains(string(b), `"outputs":[]`) {
		t.Errorf("%s: want outputs []", b)
	}
}
