package jupyter_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// nbResult is what testdata/nbrun.py prints of an executed notebook.
type nbResult struct {
	Cells []struct {
		Streams map[string]string `json:"streams"`
		Outputs []map[string]any  `json:"outputs"`
	} `json:"cells"`
	Counts   []any  `json:"counts"`
	Language string `json:"language"`
}

// TestNbclientSameAsLocalIPykernel: nbclient executes a saved notebook
// (testdata/sample.ipynb: prints, results, stderr, an error with
// allow_errors, a matplotlib figure, state across cells) through kiln's
// gateway and on a local ipykernel; each stream's text, the other
// outputs' types, text and MIME types in order, and the execution counts
// must be the same.
func TestNbclientSameAsLocalIPykernel(t *testing.T) {
	need(t, map[string]string{"nbclient": "python3-nbclient", "ipykernel": "python3-ipykernel", "jupyter_client": "python3-jupyter-client",
		"tornado": "python3-tornado", "matplotlib": "python3-matplotlib"})
	s := startServe(t)
	parse := func(out string) nbResult {
		var r nbResult
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
			t.Fatalf("nbrun.py printed %q: %v", out, err)
		}
		return r
	}
	local := parse(runPython(t, 3*time.Minute, "nbrun.py", "local"))
	kiln := parse(runPython(t, 5*time.Minute, "nbrun.py", "kiln", s.url, s.key))
	if len(local.Cells) != 8 {
		t.Fatalf("the local run has %d code cells, want 8: %+v", len(local.Cells), local)
	}
	if d := cmp.Diff(local, kiln); d != "" {
		t.Errorf("kiln's outputs differ from a local ipykernel's (-local +kiln):\n%s", d)
	}
}
