// Package cgroups puts each sandbox into its own control groups and reads
// back what the sandbox used.
//
// It is a small layer of its own over cgroup v2 and cgroup v1 (including the
// "hybrid" layout with v1 controllers and an empty cgroup2 mount); Detect
// picks one at run time from /proc/self/mountinfo.
//
// Every sandbox gets, in every hierarchy kiln uses (memory, pids, cpu,
// cpuacct on v1; the unified hierarchy on v2):
//
//	<mount>/<root group>/<id>/agent   the sandbox's PID 1 agent, small fixed limits
//	<mount>/<root group>/<id>/user    the user's code, the sandbox's limits
//
// so user code that exhausts its memory or pids never starves the agent.
//
// The host side (Host, Group) runs as root. The sandbox side (FromSpec,
// Handles) runs unprivileged inside the sandbox and works only through files
// of user/ that the host opened and passed in as inherited descriptors; the
// kernel checks writes through them against the opener's credentials (Linux
// 5.16 and later, v1 and v2).
package cgroups

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid is wrapped by every error about a bad argument: a malformed
// sandbox id, limits out of range, an unusable handle spec.
var ErrInvalid = errors.New("invalid argument")

// Version is the cgroup version a Host drives.
type Version int

const (
	V1 Version = 1
	V2 Version = 2
)

func (v Version) String() string {
	switch v {
	case V1:
		return "cgroup v1"
	case V2:
		return "cgroup v2"
	}
	return fmt.Sprintf("cgroup version %d", int(v))
}

// Limits are the resource limits of one cgroup.
type Limits struct {
	// MemoryBytes caps memory (no swap). Required, at least MinMemoryBytes.
	MemoryBytes int64 `json:"memory_bytes"`
	// Pids caps the number of processes and threads. Required, at least MinPids.
	Pids int64 `json:"pids"`
	// CPUMillis caps CPU time: 1000 is one CPU. 0 means no CPU cap; otherwise
	// at least MinCPUMillis.
	CPUMillis int64 `json:"cpu_millis"`
}

// Bounds checked by Limits.Validate.
const (
	MinMemoryBytes = 16 << 20
	MinPids        = 8
	MinCPUMillis   = 10

	maxPids      = 4 << 20   // the kernel's PID_MAX_LIMIT
	maxCPUMillis = 1_000_000 // a thousand CPUs
)

// DefaultAgentLimits are the limits of a sandbox's agent/ group: enough for
// the agent and for the short-lived helper it starts to join user/.
func DefaultAgentLimits() Limits {
	return Limits{MemoryBytes: 128 << 20, Pids: 64}
}

// Validate reports whether l is within the bounds above. The error wraps
// ErrInvalid.
func (l Limits) Validate() error {
	switch {
	case l.MemoryBytes < MinMemoryBytes:
		return fmt.Errorf("%w: memory limit %d bytes is below the minimum of %d (16 MiB)", ErrInvalid, l.MemoryBytes, MinMemoryBytes)
	case l.Pids < MinPids:
		return fmt.Errorf("%w: pids limit %d is below the minimum of %d", ErrInvalid, l.Pids, MinPids)
	case l.Pids > maxPids:
		return fmt.Errorf("%w: pids limit %d is above the kernel's maximum of %d", ErrInvalid, l.Pids, maxPids)
	case l.CPUMillis < 0:
		return fmt.Errorf("%w: cpu limit %d millis is negative", ErrInvalid, l.CPUMillis)
	case l.CPUMillis > 0 && l.CPUMillis < MinCPUMillis:
		return fmt.Errorf("%w: cpu limit %d millis is below the minimum of %d", ErrInvalid, l.CPUMillis, MinCPUMillis)
	case l.CPUMillis > maxCPUMillis:
		return fmt.Errorf("%w: cpu limit %d millis is above the maximum of %d", ErrInvalid, l.CPUMillis, maxCPUMillis)
	}
	return nil
}

// Usage is what a user/ group has used since it was made (or, for
// PeakMemoryBytes, since the last Handles.ResetPeak).
type Usage struct {
	// PeakMemoryBytes is the highest memory use seen. 0 if the kernel does
	// not report it (cgroup v2 before Linux 5.19).
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// OOMKills counts processes killed by the OOM killer for hitting the
	// memory limit.
	OOMKills int64 `json:"oom_kills"`
	// PidsLimitHits counts forks and clones refused because of the pids limit.
	PidsLimitHits int64 `json:"pids_limit_hits"`
	// CPUTime is the CPU time used, user and system together.
	CPUTime time.Duration `json:"cpu_ns"`
}

// validID reports whether id is a sandbox id: [a-z0-9-]{1,64}.
func validID(id string) error {
	if len(id) == 0 || len(id) > 64 {
		return fmt.Errorf("%w: sandbox id %q must be 1 to 64 characters", ErrInvalid, id)
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("%w: sandbox id %q may hold only a-z, 0-9 and -", ErrInvalid, id)
		}
	}
	return nil
}
