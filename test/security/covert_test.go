//go:build linux

package security

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent/boot"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestHostFactsMasked: /proc files that describe the host and its other
// tenants read empty in a sandbox: the host's file locks, its kernel's
// command line and configuration, its disks, interrupts and pressure.
// Every path of native's list (boot.ProcMasks, boot.ProcDirMasks) is
// checked, on the Docker backend too, which masks the same list.
func TestHostFactsMasked(t *testing.T) {
	env(t)
	files, _ := json.Marshal(boot.ProcMasks)
	dirs, _ := json.Marshal(boot.ProcDirMasks)
	res := attack(t, "python", fmt.Sprintf(`
import os
for p in %s:
    try:
        with open("/proc/" + p, "rb") as f:
            print(p, len(f.read()))
    except OSError as e:
        print(p, "error", e.errno)
for p in %s:
    try:
        print(p, len(os.listdir("/proc/" + p)))
    except OSError as e:
        print(p, "error", e.errno)
`, files, dirs), kiln.Limits{})
	for _, line := range lines(res.Stdout) {
		if f := strings.Fields(line); len(f) == 2 && f[1] != "0" {
			t.Errorf("/proc/%s shows %s bytes (entries) of the host's; want it empty", f[0], f[1])
		}
	}
	if n, want := len(lines(res.Stdout)), len(boot.ProcMasks)+len(boot.ProcDirMasks); n != want {
		t.Errorf("want %d lines of output:\n%v", want, res)
	}
}

// TestUsrLocksPrivate: a file lock on a file of the shared read-only /usr
// is not seen across the sandbox's boundary. The host holds an exclusive
// flock on /usr/bin/env; the sandbox takes its own at once, and finds no
// lock in /proc/locks.
func TestUsrLocksPrivate(t *testing.T) {
	env(t)
	needUsrOverlay(t)
	f, err := os.Open("/usr/bin/env")
	if err != nil {
		t.Skip("no /usr/bin/env on this host")
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock on the host: %v", err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	res := attack(t, "python", `
import fcntl
f = open("/usr/bin/env", "rb")
try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("flock free")
except OSError as e:
    print("flock busy", e.errno)
`, kiln.Limits{})
	if !strings.Contains(res.Stdout, "flock free") {
		t.Errorf("a lock the host holds on /usr/bin/env is seen in the sandbox, a covert channel between tenants:\n%v", res)
	}
}

// TestSpeculationControls: user code runs with speculative store bypass
// disabled (and indirect branch speculation where the kernel leaves it to
// each process), as /proc/self/status inside the sandbox shows.
func TestSpeculationControls(t *testing.T) {
	env(t)
	res := attack(t, "python", `
for line in open("/proc/self/status"):
    if line.startswith("Speculation"):
        print(line.strip())
`, kiln.Limits{})
	got := map[string]string{}
	for _, line := range lines(res.Stdout) {
		k, v, _ := strings.Cut(line, ":")
		got[k] = strings.TrimSpace(v)
	}
	ssb, ok := got["Speculation_Store_Bypass"]
	if !ok {
		// Kernels before 4.17 have no such line, and no control to set.
		t.Logf("the kernel does not report Speculation_Store_Bypass; nothing to set")
		return
	}
	if !speculationControl(unix.PR_SPEC_STORE_BYPASS) {
		// The kernel offers no per-process control (mitigations off, or a
		// CPU it deems unaffected): user code can be no better off than the
		// host's own processes, and must be no worse.
		host := hostSpeculation(t)
		if ssb != host["Speculation_Store_Bypass"] {
			t.Errorf("user code runs with Speculation_Store_Bypass: %s, the host's processes with %s; with no per-process control they must agree", ssb, host["Speculation_Store_Bypass"])
		}
		t.Logf("this kernel offers no control of speculative store bypass (%s; see /sys/devices/system/cpu/vulnerabilities/spec_store_bypass): checked that the sandbox is as the host", ssb)
		return
	}
	if ssb == "vulnerable" {
		t.Errorf("user code runs with Speculation_Store_Bypass: %s; want it mitigated (thread force mitigated)", ssb)
	}
	if ib := got["SpeculationIndirectBranch"]; ib == "conditional enabled" && speculationControl(unix.PR_SPEC_INDIRECT_BRANCH) {
		t.Errorf("user code runs with SpeculationIndirectBranch: %s, which the kernel lets a process disable", ib)
	}
}

// hostSpeculation reads the speculation lines of this test process's own
// /proc status.
func hostSpeculation(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(k, "Speculation") {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// speculationControl reports whether the kernel lets a process disable the
// speculation feature which (PR_SPEC_PRCTL in its answer).
func speculationControl(which int) bool {
	r, err := unix.PrctlRetInt(unix.PR_GET_SPECULATION_CTRL, uintptr(which), 0, 0, 0)
	return err == nil && r&unix.PR_SPEC_PRCTL != 0
}

// TestUsrInotifyPrivate: a watch on a file of /usr does not see the host
// (or another sandbox) open it: the overlay's inodes are the sandbox's own.
func TestUsrInotifyPrivate(t *testing.T) {
	env(t)
	needUsrOverlay(t)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				os.ReadFile("/usr/bin/env")
			}
		}
	}()
	res := attack(t, "python", `
import ctypes, os, select
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
if fd < 0 or libc.inotify_add_watch(fd, b"/usr/bin/env", 0x20 | 0x01) < 0:
    print("no inotify", ctypes.get_errno())
else:
    r, _, _ = select.select([fd], [], [], 2)
    print("event seen" if r else "no event")
`, kiln.Limits{})
	if !strings.Contains(res.Stdout, "no event") && !strings.Contains(res.Stdout, "no inotify") {
		t.Errorf("the sandbox sees the host open /usr/bin/env through inotify:\n%v", res)
	}
}

var (
	usrFSOnce sync.Once
	usrFS     string
)

// usrFSType is the file system type of /usr inside a sandbox: "overlay",
// or the host's own where the kernel refuses overlays in a user namespace
// (before Linux 5.11, or without the overlay module) and the sandbox falls
// back to a read-only bind.
func usrFSType(t *testing.T) string {
	t.Helper()
	usrFSOnce.Do(func() {
		res := attack(t, "python", `
for line in open("/proc/self/mountinfo"):
    pre, _, post = line.partition(" - ")
    if pre.split()[4] == "/usr":
        print(post.split()[0])
`, kiln.Limits{})
		if f := strings.Fields(res.Stdout); len(f) > 0 {
			usrFS = f[len(f)-1]
		}
	})
	return usrFS
}

// needUsrOverlay skips a test of what the /usr overlay gives when this
// kernel gave the sandbox a bind instead. On Docker there is no such
// fallback: each container's /usr is an overlay volume of its own.
func needUsrOverlay(t *testing.T) {
	t.Helper()
	fs := usrFSType(t)
	if fs != "overlay" && theSuite != nil && theSuite.onDocker() {
		// The engine mounts the overlay itself, as root, on any kernel.
		t.Fatalf("/usr in a container is %q; want the container's own read-only overlay of the host's /usr (usr_linux.go)", fs)
	}
	if fs != "overlay" {
		t.Skipf("/usr in a sandbox is %q, not an overlay: this kernel refuses overlays in a user namespace (docs/SECURITY.md, Known limits)", fs)
	}
}
