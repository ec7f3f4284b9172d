package cgroups

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// v2Settings are the writes that put l on the group rel (such as
// "kiln/<id>/user").
//
// memory.oom.group is left at 0: with 1, one OOM kill would take every
// process in user/, a REPL kernel included, where with 0 the kernel kills
// only the biggest process (usually the one that ran away) and a kernel
// session can report the failure and go on. Revisit if a workload needs
// all-or-nothing.
func (h *Host) v2Settings(rel string, l Limits) []setting {
	dir := filepath.Join(h.Mounts.Memory, rel)
	s := []setting{
		{path: filepath.Join(dir, "memory.max"), value: strconv.FormatInt(l.MemoryBytes, 10)},
		// Absent without swap accounting (no swap at all, or swapaccount=0).
		{path: filepath.Join(dir, "memory.swap.max"), value: "0", optional: true},
		{path: filepath.Join(dir, "pids.max"), value: strconv.FormatInt(l.Pids, 10)},
	}
	if l.CPUMillis > 0 {
		quota := l.CPUMillis * cfsPeriodMicros / 1000
		s = append(s, setting{path: filepath.Join(dir, "cpu.max"), value: fmt.Sprintf("%d %d", quota, cfsPeriodMicros)})
	}
	return s
}

// v2StatFiles are the files of the group rel that Usage reads.
func (h *Host) v2StatFiles(rel string) [numStats]string {
	dir := filepath.Join(h.Mounts.Memory, rel)
	return [numStats]string{
		statPeak: filepath.Join(dir, "memory.peak"),
		statOOM:  filepath.Join(dir, "memory.events"),
		statPids: filepath.Join(dir, "pids.events"),
		statCPU:  filepath.Join(dir, "cpu.stat"),
	}
}

// enableControllers turns on kiln's controllers for the children of dir,
// writing cgroup.subtree_control only if some are off.
func enableControllers(dir string) error {
	path := filepath.Join(dir, "cgroup.subtree_control")
	b, err := readFile(path)
	if err != nil {
		return err
	}
	missing := without(v2Controllers, strings.Fields(string(b)))
	if len(missing) == 0 {
		return nil
	}
	return writeValue(path, "+"+strings.Join(missing, " +"))
}
