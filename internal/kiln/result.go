package kiln

import "time"

// Usage is what one execution consumed. On the wire the times are
// milliseconds (wall_ms, cpu_ms: numbers with microsecond precision), like
// every duration of the API, whose names carry their unit (MarshalJSON).
type Usage struct {
	Wall        time.Duration `json:"wall_ms"`
	CPU         time.Duration `json:"cpu_ms"`
	PeakMemory  int64         `json:"peak_memory_bytes"`
	OutputBytes int64         `json:"output_bytes"`
}

// LimitHit names a limit an execution ran into.
type LimitHit string

const (
	HitTime   LimitHit = "time"
	HitMemory LimitHit = "memory"
	HitPids   LimitHit = "pids"
	HitOutput LimitHit = "output"
)

// Exit is how a process ended: an exit code, or the signal that killed it.
type Exit struct {
	Code     int        `json:"code"`             // -1 when killed by a signal
	Signal   string     `json:"signal,omitempty"` // e.g. "SIGKILL"
	Canceled bool       `json:"canceled,omitempty"`
	Limits   []LimitHit `json:"limits,omitempty"` // limits hit, in the order found
	Usage    Usage      `json:"usage"`
}

// Hit reports whether the execution ran into limit l.
func (e Exit) Hit(l LimitHit) bool {
	for _, h := range e.Limits {
		if h == l {
			return true
		}
	}
	return false
}
