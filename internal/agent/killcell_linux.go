package agent

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A session's program exec (protocol.KillGroup) must be stopped without
// touching the session's kernels, so the agent cannot use kill(-1). Its
// own process group and session are not enough either: a process that
// calls setsid, or is orphaned by a double fork, leaves both and is
// reparented to PID 1. What a process cannot shed is when it started and
// who its ancestors are, and the agent, as PID 1 of the pid namespace,
// sees every process. So a stopped exec takes with it every process that
// started after the exec was launched and does not descend from a kernel
// or a spare: nothing else starts processes while a program cell runs
// (cells of a session run one at a time). This holds on cgroup v1 and v2
// alike, as it uses no cgroup at all. A kernel's own background thread that
// starts a detached process while a program cell runs loses it too; that
// is the price, and it is documented.

// clockTicks is the unit of a process's start time in /proc/PID/stat
// (USER_HZ, 100 on every architecture Linux runs Go on).
const clockTicks = 100

// bootTicks is now, in the unit and clock of /proc/PID/stat's start time.
func bootTicks() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return ts.Nano() / (1e9 / clockTicks)
}

// procStat is what killCell needs to know of a process.
type procStat struct {
	ppid, pgrp, sid int
	start           int64 // clock ticks since boot
	zombie          bool
}

// readStat parses /proc/PID/stat.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces and parentheses; fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	var st procStat
	var errs [4]error
	st.ppid, errs[0] = strconv.Atoi(f[1])
	st.pgrp, errs[1] = strconv.Atoi(f[2])
	st.sid, errs[2] = strconv.Atoi(f[3])
	st.start, errs[3] = strconv.ParseInt(f[19], 10, 64)
	st.zombie = f[0] == "Z" || f[0] == "X"
	for _, err := range errs {
		if err != nil {
			return procStat{}, false
		}
	}
	return st, true
}

// processes reads every process but PID 1.
func processes() map[int]procStat {
	out := map[int]procStat{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == 1 {
			continue
		}
		if st, ok := readStat(p); ok {
			out[p] = st
		}
	}
	return out
}

// protected are the processes a program exec may never take down: the
// kernels, the waiting spare and the open terminals' shells.
func (a *Agent) protected() map[int]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	keep := map[int]bool{}
	for _, k := range a.kernels {
		keep[k.pid] = true
	}
	if a.spare != nil {
		keep[a.spare.pid] = true
	}
	a.terminalPids(keep)
	return keep
}

// descends reports whether p is one of keep or has an ancestor in it.
func descends(p int, procs map[int]procStat, keep map[int]bool) bool {
	for range len(procs) + 1 { // a bound, in case the snapshot holds a cycle
		if keep[p] {
			return true
		}
		// PID 1 is not in procs: the walk ends there unless PID 1 is in
		// keep (a container's agent, which is its PID 1).
		st, ok := procs[p]
		if !ok || st.ppid == 0 {
			return false
		}
		p = st.ppid
	}
	return false
}

// killCell kills everything a stopped program exec started: its process
// group and session, and every process started since it was launched
// that does not descend from a kernel or a spare. It repeats until none is
// left: a process forking while it is killed adds members, but one with a
// SIGKILL pending cannot fork, so each round leaves fewer.
func (a *Agent) killCell(x *execution) {
	for round := 0; round < 100; round++ {
		unix.Kill(-x.pid, unix.SIGKILL)
		procs := processes()
		keep := a.protected()
		found := false
		self := map[int]bool{os.Getpid(): true}
		for p, st := range procs {
			if st.zombie || a.unisolated && !descends(p, procs, self) {
				continue // without a pid namespace, only our own descendants
			}
			ours := st.pgrp == x.pid || st.sid == x.pid || p == x.pid
			if !ours && st.start >= x.since && !descends(p, procs, keep) {
				ours = true
			}
			if ours && !keep[p] {
				unix.Kill(p, unix.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitGone waits, after a stop, until every process the exec started is
// gone, zombies included (the reaper takes those), so that the exit the
// client reads is never followed by one of the exec's processes still
// showing on the host. A process with SIGKILL pending goes within a few
// milliseconds even on a loaded machine; the wait is bounded all the same.
func (a *Agent) awaitGone(x *execution) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		keep := a.protected()
		procs := processes()
		left := false
		for p, st := range procs {
			if p != os.Getpid() && st.start >= x.since && !descends(p, procs, keep) {
				left = true
				if !st.zombie {
					unix.Kill(p, unix.SIGKILL)
				}
			}
		}
		if !left {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
