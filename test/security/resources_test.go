//go:build linux

package security

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// stopGrace is how soon after its timeout or cancel a run must be over:
// the product promises within one second; engine.Run also destroys the
// sandbox in that time.
const stopGrace = 1500 * time.Millisecond

// requireHit fails unless the run hit at least one of the limits.
func requireHit(t *testing.T, res result, limits ...kiln.LimitHit) {
	t.Helper()
	if theSuite != nil && theSuite.onDocker() {
		requireHitDocker(t, res, limits...)
		return
	}
	for _, l := range limits {
		if res.Exit.Hit(l) {
			return
		}
	}
	t.Errorf("want Exit.Limits to contain one of %v:\n%v", limits, res)
}

// requireStoppedBy fails unless a run with limit timeout ended, sandbox
// destroyed, within stopGrace of the timeout.
func requireStoppedBy(t *testing.T, res result, timeout time.Duration) {
	t.Helper()
	if res.Exit.Usage.Wall > timeout+time.Second {
		t.Errorf("the program ran %v with a timeout of %v; want it stopped within a second", res.Exit.Usage.Wall, timeout)
	}
	grace := stopGrace
	if theSuite != nil && theSuite.kube != nil {
		// engine.Run starts a Pod, which natively is a few milliseconds'
		// work and here most of a second or more: the grace is counted
		// from the program's start.
		grace += theSuite.kube.startCost()
	}
	if res.Elapsed > timeout+grace {
		t.Errorf("engine.Run took %v with a timeout of %v; want it over within %v of the timeout (%v, with the backend's start)", res.Elapsed, timeout, stopGrace, grace)
	}
}

const forkBombPython = `
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
`

// TestForkBomb: a fork bomb runs into the pids limit and is stopped; the
// health check after it proves the next sandbox starts normally.
func TestForkBomb(t *testing.T) {
	env(t)
	const timeout = 3 * time.Second
	for _, tc := range []struct{ name, language, code string }{
		// The shell's own copy gives up once forks fail and ends the run;
		// what it started goes on until the sandbox is destroyed.
		{"bash", "bash", `:(){ :|:& };:`},
		{"python", "python", forkBombPython},
		{"python threads", "python", `
import threading, time
while True:
    try:
        threading.Thread(target=time.sleep, args=(100,)).start()
    except RuntimeError:
        pass
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := attack(t, tc.language, tc.code, kiln.Limits{Timeout: timeout, Pids: 64})
			requireHit(t, res, kiln.HitPids)
			requireStoppedBy(t, res, timeout)
		})
	}
}

// TestMemoryBomb: a program that allocates without end is killed at the
// memory limit, which is reported, and never used more than the limit.
func TestMemoryBomb(t *testing.T) {
	env(t)
	const limit = 64 * kiln.MiB
	for _, tc := range []struct{ name, language, code string }{
		{"python", "python", `
a = []
while True:
    a.append(b"x" * (1 << 20))
`},
		{"node", "node", `
const a = [];
for (;;) a.push(Buffer.alloc(1 << 20, 1));
`},
		{"bash", "bash", `a=x; while :; do a=$a$a; done`},
		{"python forks", "python", `
import os
for _ in range(4):
    if os.fork() == 0:
        break
a = []
while True:
    a.append(bytearray(1 << 20))
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := attack(t, tc.language, tc.code, kiln.Limits{Timeout: 10 * time.Second, MemoryBytes: limit})
			requireHit(t, res, kiln.HitMemory)
			if res.Exit.Hit(kiln.HitTime) {
				t.Errorf("the memory bomb ran into the time limit rather than being killed at the memory limit:\n%v", res)
			}
			if res.Exit.Usage.PeakMemory > limit && theSuite.onDocker() {
				t.Logf("held differently on Docker: peak memory %s is the largest process's maxrss, which counts the file pages it maps (its binary, libraries) that the container's cgroup does not charge again", kiln.FormatBytes(res.Exit.Usage.PeakMemory))
			} else if res.Exit.Usage.PeakMemory > limit {
				t.Errorf("peak memory %s is above the limit %s", kiln.FormatBytes(res.Exit.Usage.PeakMemory), kiln.FormatBytes(limit))
			}
		})
	}
}

// spinPrograms keep every CPU they can get busy until stopped.
var spinPrograms = []struct{ name, language, code string }{
	{"python threads", "python", `
import threading
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin).start()
spin()
`},
	{"python multiprocessing", "python", `
import multiprocessing
def spin():
    while True:
        pass
if __name__ == "__main__":
    for _ in range(4):
        multiprocessing.Process(target=spin).start()
    spin()
`},
	{"node", "node", `for (;;) {}`},
	{"bash", "bash", `spin() { while :; do :; done; }; spin & spin & spin`},
}

// memoryChurn grows to most of a 1 GiB limit and then keeps rewriting it,
// in four processes.
const memoryChurn = `
import os
for _ in range(3):
    if os.fork() == 0:
        break
blocks = [bytearray(1 << 20) for _ in range(200)]
while True:
    for b in blocks:
        b[::4096] = b"x" * 256
`

// TestCPUSpin: CPU hogs in every language are stopped within about a
// second of a 2 s timeout, the time limit is reported, and the CPU limit
// (one CPU by default) held while they ran.
func TestCPUSpin(t *testing.T) {
	env(t)
	const timeout = 2 * time.Second
	for _, tc := range append(spinPrograms, struct{ name, language, code string }{"memory churn", "python", memoryChurn}) {
		t.Run(tc.name, func(t *testing.T) {
			res := attack(t, tc.language, tc.code, kiln.Limits{Timeout: timeout, MemoryBytes: 1 * kiln.GiB})
			requireHit(t, res, kiln.HitTime)
			requireStoppedBy(t, res, timeout)
			if res.Exit.Signal != "SIGKILL" {
				t.Errorf("want the program killed by SIGKILL, got signal %q", res.Exit.Signal)
			}
			// One CPU for the wall time, with some slack for accounting.
			if max := res.Exit.Usage.Wall * 5 / 4; res.Exit.Usage.CPU > max {
				t.Errorf("the program used %v of CPU in %v; the limit of one CPU allows about %v", res.Exit.Usage.CPU, res.Exit.Usage.Wall, res.Exit.Usage.Wall)
			}
		})
	}
}

// TestSleepForever: a program that never ends is stopped at its timeout.
func TestSleepForever(t *testing.T) {
	env(t)
	const timeout = 2 * time.Second
	for _, tc := range []struct{ name, language, code string }{
		{"python", "python", "import time\ntime.sleep(10**6)"},
		{"bash", "bash", "sleep infinity"},
		{"node", "node", "setInterval(() => {}, 1000);"},
		{"bash read stdin", "bash", "exec 0</dev/null; read -r x < /dev/zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := attack(t, tc.language, tc.code, kiln.Limits{Timeout: timeout})
			requireHit(t, res, kiln.HitTime)
			requireStoppedBy(t, res, timeout)
			if res.Exit.Usage.Wall < timeout {
				t.Errorf("the program was stopped after %v, before its timeout of %v", res.Exit.Usage.Wall, timeout)
			}
		})
	}
}

// doubleFork leaves a grandchild in a session of its own, sleeping, and
// then either sleeps itself (so that the timeout must kill both) or exits.
const doubleFork = `
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        print("daemon", os.getpid(), flush=True)
        time.sleep(1000)
    os._exit(0)
os.wait()
if sys.argv[-1] == "wait":
    time.sleep(1000)
`

// TestDoubleForkSurvivor: a daemonized grandchild does not outlive its
// run: after a one-shot run nothing of the sandbox is on the host, and in
// a sandbox that goes on, the timeout kills it along with the program.
func TestDoubleForkSurvivor(t *testing.T) {
	env(t)
	const timeout = 2 * time.Second
	t.Run("one-shot", func(t *testing.T) {
		res := attackRun(t, context.Background(), engine.Run{Language: "python", Code: doubleFork, Args: []string{"wait"}, Limits: kiln.Limits{Timeout: timeout}})
		requireHit(t, res, kiln.HitTime)
		requireStoppedBy(t, res, timeout)
		if !strings.HasPrefix(res.Stdout, "daemon ") {
			t.Errorf("the grandchild did not start:\n%v", res)
		}
		// attackRun has checked that no process of the sandbox is left.
	})
	t.Run("sandbox", func(t *testing.T) {
		s := env(t)
		sb := s.sandbox(t, native.Spec{})
		if err := sb.Agent.WriteFile(context.Background(), "fork.py", []byte(doubleFork), 0); err != nil {
			t.Fatal(err)
		}
		out, _, info := execIn(t, sb, timeout, "/usr/bin/python3", "fork.py", "wait")
		if !info.TimedOut || !strings.HasPrefix(out, "daemon ") {
			t.Fatalf("want the program to start its daemon and time out; got %q, %+v", out, info)
		}
		// Seen from the host: another exec could not see them (each exec
		// is its own Landlock domain).
		if procs := userProcs(t, sb); len(procs) > 0 {
			t.Errorf("processes of the timed-out program are still running in the sandbox: %v", procs)
		}
		// The same escape without a timeout: the exec ends when the
		// program does, and Destroy (in cleanup) must still get the daemon.
		start := time.Now()
		out, _, info = execIn(t, sb, 30*time.Second, "/usr/bin/python3", "fork.py", "exit")
		if took := time.Since(start); took > 2*time.Second || info.Code != 0 || !strings.HasPrefix(out, "daemon ") {
			t.Errorf("a program that leaves a daemon behind: output %q, exit %+v after %v; want it to end at once", out, info, took)
		}
		if procs := userProcs(t, sb); len(procs) == 0 {
			t.Errorf("no daemon found on the host before Destroy; the case proves nothing")
		}
	})
}

// TestOutputFlood: stdout and stderr flooded at once are cut at the output
// limit, which is reported, and the program is stopped.
func TestOutputFlood(t *testing.T) {
	env(t)
	const limit = 64 * kiln.KiB
	for _, tc := range []struct{ name, language, code string }{
		{"python", "python", `
import os, threading
chunk = b"x" * 65536
def flood(fd):
    while True:
        os.write(fd, chunk)
threading.Thread(target=flood, args=(2,)).start()
flood(1)
`},
		{"bash", "bash", `yes out & yes err >&2 & wait`},
		{"node", "node", `
const chunk = "x".repeat(65536);
for (;;) { process.stdout.write(chunk); process.stderr.write(chunk); }
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := attack(t, tc.language, tc.code, kiln.Limits{Timeout: 10 * time.Second, OutputBytes: limit})
			requireHit(t, res, kiln.HitOutput)
			if got := len(res.Stdout) + len(res.Stderr); got > limit {
				t.Errorf("collected %d bytes of output (%d stdout, %d stderr); the limit is %d", got, len(res.Stdout), len(res.Stderr), limit)
			}
			if res.Exit.Usage.OutputBytes > limit {
				t.Errorf("usage says %d bytes of output; the limit is %d", res.Exit.Usage.OutputBytes, limit)
			}
			if res.Exit.Hit(kiln.HitTime) || res.Elapsed > 3*time.Second {
				t.Errorf("the flood was not stopped at the output limit (took %v):\n%v", res.Elapsed, res)
			}
		})
	}
}

// fillProgram writes to each path in 64 KiB pieces until the write fails
// and prints "PATH ERRNO BYTES".
const fillProgram = `
import errno, os
for path in ("/tmp/fill", "/workspace/fill", "/dev/shm/fill"):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    n = 0
    try:
        while True:
            n += os.write(fd, b"x" * 65536)
    except OSError as e:
        print(path, errno.errorcode[e.errno], n)
    os.close(fd)
    os.unlink(path)
`

// TestDiskFill: /tmp, the workspace and /dev/shm end at their size limits
// with ENOSPC; no write gets past them.
func TestDiskFill(t *testing.T) {
	env(t)
	const size = 8 * kiln.MiB
	res := attack(t, "python", fillProgram, kiln.Limits{Timeout: 10 * time.Second, TmpBytes: size, WorkspaceBytes: size})
	got := lines(res.Stdout)
	if len(got) != 3 {
		t.Fatalf("want three lines, one per file system:\n%v", res)
	}
	for _, l := range got {
		f := strings.Fields(l)
		n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		if len(f) != 3 || f[1] != "ENOSPC" || n > size || n < size-1*kiln.MiB {
			t.Errorf("%q: want ENOSPC after between %d and %d bytes", l, size-1*kiln.MiB, size)
		}
	}
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", sh(`probe "dd /tmp" dd if=/dev/zero of=/tmp/fill bs=1M count=100`), kiln.Limits{Timeout: 10 * time.Second, TmpBytes: size})
		expectLines(t, res, "dd /tmp ENOSPC")
	})
	t.Run("file size", func(t *testing.T) {
		res := attack(t, "python", `
import errno, os
fd = os.open("/tmp/big", os.O_WRONLY | os.O_CREAT)
n = 0
try:
    while True:
        n += os.write(fd, b"x" * 65536)
except OSError as e:
    print(errno.errorcode[e.errno], n)
`, kiln.Limits{Timeout: 10 * time.Second, FileSizeBytes: 1 * kiln.MiB})
		// Python ignores SIGXFSZ, so the write fails with EFBIG.
		expectLines(t, res, fmt.Sprintf("EFBIG %d", 1*kiln.MiB))
	})
}

// TestInodeExhaustion: creating empty files ends at the inode limit with
// ENOSPC, in /tmp and in the workspace.
func TestInodeExhaustion(t *testing.T) {
	env(t)
	const inodes = 64
	res := attack(t, "python", `
import errno, os
for d in ("/tmp", "/workspace"):
    n = 0
    try:
        while True:
            open("%s/f%d" % (d, n), "w").close()
            n += 1
    except OSError as e:
        print(d, errno.errorcode[e.errno], n)
`, kiln.Limits{Timeout: 10 * time.Second, Inodes: inodes})
	got := lines(res.Stdout)
	if len(got) != 2 {
		t.Fatalf("want two lines:\n%v", res)
	}
	for _, l := range got {
		f := strings.Fields(l)
		n, _ := strconv.Atoi(f[len(f)-1])
		if len(f) != 3 || f[1] != "ENOSPC" || n > inodes || n < inodes-4 {
			t.Errorf("%q: want ENOSPC after about %d files, never more", l, inodes)
		}
	}
}

// TestFDExhaustion: opening files ends at the open-files limit with
// EMFILE, and the limit cannot be raised.
func TestFDExhaustion(t *testing.T) {
	env(t)
	const openFiles = 32
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", py(`
import resource
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print(ename(e.errno), "highest fd", max(fds))
print("limit", resource.getrlimit(resource.RLIMIT_NOFILE))
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    print("raised")
except ValueError as e:
    print("raise refused")
`), kiln.Limits{Timeout: 10 * time.Second, OpenFiles: openFiles})
		expectLines(t, res, fmt.Sprintf("EMFILE highest fd %d", openFiles-1), fmt.Sprintf("limit (%d, %d)", openFiles, openFiles), "raise refused")
	})
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", sh(`ulimit -n; probe "ulimit -n 4096" bash -c 'ulimit -n 4096'`), kiln.Limits{Timeout: 10 * time.Second, OpenFiles: openFiles})
		expectLines(t, res, strconv.Itoa(openFiles), "ulimit -n 4096 EPERM")
	})
}

// TestCancelBombs: cancelling a run during a CPU bomb or a memory bomb
// takes effect within a second: engine.Run returns, sandbox destroyed,
// with Exit.Canceled.
func TestCancelBombs(t *testing.T) {
	s := env(t)
	after := 500 * time.Millisecond
	if s.onDocker() {
		// A container takes the engine about a second to start on a
		// loaded machine: cancel once the bomb runs.
		after = 2 * time.Second
	}
	for _, tc := range []struct{ name, language, code string }{
		{"cpu python multiprocessing", spinPrograms[1].language, spinPrograms[1].code},
		{"cpu node", spinPrograms[2].language, spinPrograms[2].code},
		{"memory churn", "python", memoryChurn},
		{"fork bomb", "python", forkBombPython},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(after, cancel)
			r := engine.Run{Language: tc.language, Code: tc.code, Limits: kiln.Limits{Timeout: 30 * time.Second, MemoryBytes: 1 * kiln.GiB, Pids: 64}}
			var res result
			if s.onDocker() {
				var early bool
				if res, early = attackCancel(t, ctx, r); early {
					if took := res.Elapsed - after; took > stopGrace {
						t.Errorf("engine.Run returned %v after the cancel; want within %v", took, stopGrace)
					}
					return
				}
			} else {
				res = attackRun(t, ctx, r)
			}
			if took := res.Elapsed - after; took > stopGrace {
				t.Errorf("engine.Run returned %v after the cancel; want within %v", took, stopGrace)
			}
			if !res.Exit.Canceled {
				t.Errorf("want Exit.Canceled:\n%v", res)
			}
			if res.Exit.Hit(kiln.HitTime) {
				t.Errorf("the run ended by its timeout, not by the cancel:\n%v", res)
			}
		})
	}
}
