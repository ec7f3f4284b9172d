package kiln

import (
	"fmt"
	"strconv"
	"time"
)

// Limits bound one sandbox and each execution in it. Zero values mean "use
// the default"; Validate rejects values outside the allowed ranges.
type Limits struct {
	Timeout        time.Duration `json:"timeout"`         // wall clock per execution
	MemoryBytes    int64         `json:"memory_bytes"`    // user processes together, no swap
	Pids           int64         `json:"pids"`            // user processes and threads together
	CPUMillis      int64         `json:"cpu_millis"`      // 1000 = one CPU
	OutputBytes    int64         `json:"output_bytes"`    // stdout, stderr, displays and errors together per execution or cell
	FileSizeBytes  int64         `json:"file_size_bytes"` // largest file a process may write (RLIMIT_FSIZE)
	OpenFiles      int64         `json:"open_files"`      // RLIMIT_NOFILE per process
	TmpBytes       int64         `json:"tmp_bytes"`       // size of /tmp (and /dev/shm)
	WorkspaceBytes int64         `json:"workspace_bytes"` // size of the workspace
	Inodes         int64         `json:"inodes"`          // files in /tmp and in the workspace, each
}

const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
)

// DefaultLimits are what a run gets when it asks for nothing.
func DefaultLimits() Limits {
	return Limits{
		Timeout:        30 * time.Second,
		MemoryBytes:    512 * MiB,
		Pids:           128,
		CPUMillis:      1000,
		OutputBytes:    1 * MiB,
		FileSizeBytes:  256 * MiB,
		OpenFiles:      1024,
		TmpBytes:       256 * MiB,
		WorkspaceBytes: 512 * MiB,
		Inodes:         65536,
	}
}

// limitRange is one row of the table of allowed values.
type limitRange struct {
	name     string
	get      func(*Limits) *int64
	min, max int64
	unit     string
}

// ranges is the policy for what a client may ask for. It is a table so that
// a reviewer sees every bound in one place.
var ranges = []limitRange{
	{"memory", func(l *Limits) *int64 { return &l.MemoryBytes }, 32 * MiB, 16 * GiB, "bytes"},
	{"pids", func(l *Limits) *int64 { return &l.Pids }, 8, 4096, ""},
	{"cpu", func(l *Limits) *int64 { return &l.CPUMillis }, 50, 64000, "millicpus"},
	{"output", func(l *Limits) *int64 { return &l.OutputBytes }, 1 * KiB, 256 * MiB, "bytes"},
	{"file size", func(l *Limits) *int64 { return &l.FileSizeBytes }, 1 * MiB, 16 * GiB, "bytes"},
	{"open files", func(l *Limits) *int64 { return &l.OpenFiles }, 32, 65536, ""},
	{"tmp", func(l *Limits) *int64 { return &l.TmpBytes }, 1 * MiB, 16 * GiB, "bytes"},
	{"workspace", func(l *Limits) *int64 { return &l.WorkspaceBytes }, 1 * MiB, 64 * GiB, "bytes"},
	{"inodes", func(l *Limits) *int64 { return &l.Inodes }, 64, 4 << 20, ""},
}

const (
	minTimeout = 10 * time.Millisecond
	maxTimeout = 24 * time.Hour
)

// WithDefaults returns l with every zero field taken from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	for _, r := range ranges {
		if p := r.get(&l); *p == 0 {
			*p = *r.get(&d)
		}
	}
	return l
}

// Validate reports the first limit outside its allowed range, naming the
// range. Zero fields are allowed (they mean the default).
func (l Limits) Validate() error {
	if l.Timeout != 0 && (l.Timeout < minTimeout || l.Timeout > maxTimeout) {
		return Errorf(Invalid, "timeout %v is outside the allowed range %v to %v", l.Timeout, minTimeout, maxTimeout)
	}
	for _, r := range ranges {
		v := *r.get(&l)
		if v != 0 && (v < r.min || v > r.max) {
			return Errorf(Invalid, "%s limit %s is outside the allowed range %s to %s",
				r.name, format(v, r.unit), format(r.min, r.unit), format(r.max, r.unit))
		}
	}
	return nil
}

func format(v int64, unit string) string {
	if unit == "bytes" {
		return FormatBytes(v)
	}
	if unit == "" {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%d %s", v, unit)
}

// FormatBytes prints n in the largest binary unit that shows it exactly
// with at most two decimals: 512 MiB, 1.5 GiB, 100 bytes.
func FormatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if n >= u.size && (n*100)%u.size == 0 {
			return strconv.FormatFloat(float64(n)/float64(u.size), 'f', -1, 64) + " " + u.name
		}
	}
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
