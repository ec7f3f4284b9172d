package cgroups

import (
	"fmt"
	"time"
)

// stat names the files of user/ that Usage and Stats read.
type stat int

const (
	statPeak stat = iota // v1 memory.max_usage_in_bytes, v2 memory.peak
	statOOM              // v1 memory.oom_control, v2 memory.events
	statPids             // pids.events
	statCPU              // v1 cpuacct.usage, v2 cpu.stat
	numStats
)

func (h *Host) statFiles(rel string) [numStats]string {
	if h.Version == V2 {
		return h.v2StatFiles(rel)
	}
	return h.v1StatFiles(rel)
}

// usageFrom builds a Usage from the contents of the stat files; a nil entry
// is a file the kernel does not offer (only memory.peak may be missing).
func usageFrom(v Version, files [numStats][]byte) (Usage, error) {
	var u Usage
	var err error
	if files[statPeak] != nil {
		if u.PeakMemoryBytes, err = parseInt(files[statPeak]); err != nil {
			return Usage{}, fmt.Errorf("peak memory: %w", err)
		}
	}
	var ok bool
	// The oom_kill line is in memory.oom_control (v1) and memory.events (v2)
	// since Linux 4.13.
	if u.OOMKills, ok, err = parseKey(files[statOOM], "oom_kill"); err != nil || !ok {
		return Usage{}, fmt.Errorf("oom kills: %w", orMissing(err, "oom_kill"))
	}
	if u.PidsLimitHits, ok, err = parseKey(files[statPids], "max"); err != nil || !ok {
		return Usage{}, fmt.Errorf("pids limit hits: %w", orMissing(err, "max"))
	}
	var cpu int64
	if v == V2 {
		if cpu, ok, err = parseKey(files[statCPU], "usage_usec"); err != nil || !ok {
			return Usage{}, fmt.Errorf("cpu time: %w", orMissing(err, "usage_usec"))
		}
		u.CPUTime = time.Duration(cpu) * time.Microsecond
	} else {
		if cpu, err = parseInt(files[statCPU]); err != nil {
			return Usage{}, fmt.Errorf("cpu time: %w", err)
		}
		u.CPUTime = time.Duration(cpu)
	}
	return u, nil
}

func orMissing(err error, key string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("no %q line", key)
}
