package kiln

import (
	"bytes"
	"encoding/json"
	"math"
	"time"
)

// MarshalJSON writes missing outputs and artifacts as empty lists, never
// null: the API documents both as arrays, and a result made without a
// run (e.g. an execution recovered as interrupted after a restart) has
// neither.
func (r CellResult) MarshalJSON() ([]byte, error) {
	type plain CellResult // without this method
	p := plain(r)
	if p.Outputs == nil {
		p.Outputs = []Output{}
	}
	if p.Artifacts == nil {
		p.Artifacts = []Artifact{}
	}
	// Unescaped: the caller's encoder escapes HTML if it wants to, and
	// cannot undo an escape made here.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// usageJSON is Usage on the wire.
type usageJSON struct {
	WallMS      float64 `json:"wall_ms"`
	CPUMS       float64 `json:"cpu_ms"`
	PeakMemory  int64   `json:"peak_memory_bytes"`
	OutputBytes int64   `json:"output_bytes"`
	// Results stored before the times were milliseconds have integer
	// nanoseconds under these names; they are read, never written.
	WallNS *int64 `json:"wall,omitempty"`
	CPUNS  *int64 `json:"cpu,omitempty"`
}

// MarshalJSON writes the times as milliseconds with microsecond precision.
func (u Usage) MarshalJSON() ([]byte, error) {
	return json.Marshal(usageJSON{WallMS: millis(u.Wall), CPUMS: millis(u.CPU), PeakMemory: u.PeakMemory, OutputBytes: u.OutputBytes})
}

// UnmarshalJSON reads milliseconds, or the nanoseconds of an old record.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var w usageJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*u = Usage{Wall: fromMillis(w.WallMS), CPU: fromMillis(w.CPUMS), PeakMemory: w.PeakMemory, OutputBytes: w.OutputBytes}
	if w.WallNS != nil && w.WallMS == 0 {
		u.Wall = time.Duration(*w.WallNS)
	}
	if w.CPUNS != nil && w.CPUMS == 0 {
		u.CPU = time.Duration(*w.CPUNS)
	}
	return nil
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fromMillis(ms float64) time.Duration {
	return time.Duration(math.Round(ms * float64(time.Millisecond)))
}
