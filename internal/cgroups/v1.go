package cgroups

import (
	"path/filepath"
	"strconv"
)

// cfsPeriodMicros is the CPU bandwidth period on both versions: the quota is
// CPUMillis tenths of a millisecond in every 100 ms.
const cfsPeriodMicros = 100_000

// v1Settings are the writes that put l on the group rel (such as
// "kiln/<id>/user") in every v1 hierarchy.
func (h *Host) v1Settings(rel string, l Limits) []setting {
	mem := filepath.Join(h.Mounts.Memory, rel)
	limit := strconv.FormatInt(l.MemoryBytes, 10)
	s := []setting{
		{path: filepath.Join(mem, "memory.limit_in_bytes"), value: limit},
		// memory+swap no larger than memory: no swap. Only with swap
		// accounting; memory.limit_in_bytes must be set first, as the kernel
		// refuses a memsw limit below the memory limit.
		{path: filepath.Join(mem, "memory.memsw.limit_in_bytes"), value: limit, optional: true},
		// Without swap accounting this is all that keeps the group from
		// swapping; with it, memsw already does. Best effort either way.
		{path: filepath.Join(mem, "memory.swappiness"), value: "0", hint: true},
		{path: filepath.Join(h.Mounts.Pids, rel, "pids.max"), value: strconv.FormatInt(l.Pids, 10)},
	}
	if l.CPUMillis > 0 {
		cpu := filepath.Join(h.Mounts.CPU, rel)
		s = append(s,
			setting{path: filepath.Join(cpu, "cpu.cfs_period_us"), value: strconv.Itoa(cfsPeriodMicros)},
			setting{path: filepath.Join(cpu, "cpu.cfs_quota_us"), value: strconv.FormatInt(l.CPUMillis*cfsPeriodMicros/1000, 10)},
		)
	}
	return s
}

// v1StatFiles are the files of the group rel that Usage reads.
func (h *Host) v1StatFiles(rel string) [numStats]string {
	return [numStats]string{
		statPeak: filepath.Join(h.Mounts.Memory, rel, "memory.max_usage_in_bytes"),
		statOOM:  filepath.Join(h.Mounts.Memory, rel, "memory.oom_control"),
		statPids: filepath.Join(h.Mounts.Pids, rel, "pids.events"),
		statCPU:  filepath.Join(h.Mounts.CPUAcct, rel, "cpuacct.usage"),
	}
}
