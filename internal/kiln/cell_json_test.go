package kiln

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// The times of a usage are milliseconds on the wire, named so; a result
// stored with the old nanoseconds still reads right.
func TestUsageIsMilliseconds(t *testing.T) {
	u := Usage{Wall: 1500*time.Millisecond + 250*time.Microsecond, CPU: 3 * time.Millisecond, PeakMemory: 7, OutputBytes: 2}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"wall_ms":1500.25,"cpu_ms":3,"peak_memory_bytes":7,"output_bytes":2}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	var back Usage
	if err := json.Unmarshal(b, &back); err != nil || back != u {
		t.Fatalf("round trip: %+v, %v; want %+v", back, err, u)
	}
	var old Usage
	if err := json.Unmarshal([]byte(`{"wall":1500000000,"cpu":2000,"peak_memory_bytes":1,"output_bytes":0}`), &old); err != nil ||
		old.Wall != 1500*time.Millisecond || old.CPU != 2*time.Microsecond {
		t.Fatalf("an old record: %+v, %v", old, err)
	}
}
