package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// richProgram prints, shows a rich output with display() and writes a
// file: the same program as TestRunRichOutputs in internal/server, which
// checks that POST /v1/run gives the same.
const richProgram = `class Bold:
    def _repr_html_(self):
        return "<b>hi</b>"
    def __repr__(self):
        return "Bold()"
print("before")
display(Bold())
with open("out.txt", "w") as f:
    f.write("x")
`

// TestRunJSONIsTheAPIsCellResult: kiln run --json prints the CellResult
// of the API's one-shot run, rich outputs and artifacts included, and
// nothing else on stdout.
func TestRunJSONIsTheAPIsCellResult(t *testing.T) {
	needRoot(t)
	r := execKiln(t, invocation{}, "run", "--json", "--lang", "python", "-c", richProgram)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(r.stdout)))
	dec.DisallowUnknownFields()
	var res kiln.CellResult
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("stdout is not one CellResult: %v\n%s", err, r.stdout)
	}
	checkRichResult(t, res)
	r = execKiln(t, invocation{}, "run", "--json", "--lang", "python", "-c", "raise ValueError('no')")
	if r.code != 1 || !strings.Contains(r.stdout, `"ValueError"`) {
		t.Errorf("an exception: exit %d, stdout %s; want exit 1 and the error in the JSON", r.code, r.stdout)
	}
}

func checkRichResult(t *testing.T, res kiln.CellResult) {
	t.Helper()
	if res.Status != kiln.StatusOK || res.Language != "python" || res.Stdout != "before\n" {
		t.Errorf("result %+v; want ok, python, stdout before", res)
	}
	if len(res.Outputs) != 1 || htmlOf(res.Outputs[0].Data) != "<b>hi</b>" {
		t.Errorf("outputs %+v; want the one display() as text/html", res.Outputs)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "out.txt" || res.Artifacts[0].Change != "created" {
		t.Errorf("artifacts %+v; want out.txt created", res.Artifacts)
	}
}

func htmlOf(data map[string]json.RawMessage) string {
	var s string
	json.Unmarshal(data["text/html"], &s)
	return s
}
