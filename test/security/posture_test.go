//go:build linux

package security

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/backend/native"
)

// mountEntry is one line of /proc/PID/mountinfo.
type mountEntry struct {
	point   string
	options []string // per-mount options (ro, nosuid, ...)
	fstype  string
	source  string
	super   []string // per-superblock options (hidepid=, size=, ...)
}

func readMountinfo(pid int) ([]mountEntry, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	for _, line := range lines(string(b)) {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			return nil, fmt.Errorf("malformed mountinfo line %q", line)
		}
		out = append(out, mountEntry{
			point:   f[4],
			options: strings.Split(f[5], ","),
			fstype:  f[sep+1],
			source:  f[sep+2],
			super:   strings.Split(f[sep+3], ","),
		})
	}
	return out, nil
}

// TestPosture looks at a running user process from the host and checks
// every layer of the sandbox around it.
func TestPosture(t *testing.T) {
	s := env(t)
	sb := s.sandbox(t, native.Spec{})
	done := make(chan error, 1)
	go func() {
		_, _, _, err := tryExec(sb, 30*time.Second, "/bin/sleep", "30")
		done <- err
	}()
	userUID := sb.UserUID
	var pid int
	for deadline := time.Now().Add(5 * time.Second); pid == 0 && time.Now().Before(deadline); {
		procs, err := sandboxProcs(userUID, userUID+1)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if p.name == "sleep" {
				pid = p.pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatalf("no sleep process with host uid %d appeared", userUID)
	}
	if s.onDocker() {
		s.dockerPosture(t, sb, pid)
		if err := s.destroy(sb); err != nil {
			t.Errorf("destroy: %v", err)
		}
		<-done
		return
	}

	t.Run("status", func(t *testing.T) {
		st, err := procStatus(pid)
		if err != nil {
			t.Fatal(err)
		}
		ids := fmt.Sprintf("%d\t%d\t%d\t%d", userUID, userUID, userUID, userUID)
		for k, want := range map[string]string{
			"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
			"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
			"NoNewPrivs": "1", "Seccomp": "2", "Uid": ids, "Gid": ids, "Groups": "",
		} {
			if got := st[k]; got != want {
				t.Errorf("/proc/%d/status %s: %q, want %q", pid, k, got, want)
			}
		}
		if got := st["Speculation_Store_Bypass"]; got == "vulnerable" && speculationControl(unix.PR_SPEC_STORE_BYPASS) {
			t.Errorf("/proc/%d/status Speculation_Store_Bypass: %q; want it mitigated", pid, got)
		}
		agent, err := procStatus(sb.InitPID)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d\t%d\t%d\t%d", sb.HostUID, sb.HostUID, sb.HostUID, sb.HostUID); agent["Uid"] != want {
			t.Errorf("the agent (host pid %d) runs as uids %q, want %q: root of the sandbox must not be root of the host", sb.InitPID, agent["Uid"], want)
		}
	})

	t.Run("id maps", func(t *testing.T) {
		for _, m := range []string{"uid_map", "gid_map"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, m))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Fields(string(b)), []string{"0", fmt.Sprint(sb.HostUID), "65536"}; !slices.Equal(got, want) {
				t.Errorf("/proc/%d/%s = %q, want %q", pid, m, got, want)
			}
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
			mine, err := os.Readlink("/proc/self/ns/" + ns)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
			if err != nil {
				t.Fatal(err)
			}
			if mine == theirs {
				t.Errorf("namespace %s: the user process shares the host's %s", ns, mine)
			}
		}
		// The spawn stage roots a cgroup namespace at the user cgroup, so
		// user code does not share even the agent's.
		agent, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/cgroup", sb.InitPID))
		if theirs, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/cgroup", pid)); agent == theirs {
			t.Errorf("the user process shares the agent's cgroup namespace %s", agent)
		}
	})

	t.Run("cgroup", func(t *testing.T) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		want := "/" + cgroupRoot + "/" + sb.ID + "/user"
		var n int
		for _, line := range lines(string(b)) {
			f := strings.SplitN(line, ":", 3)
			if len(f) != 3 {
				continue
			}
			ctrls := strings.Split(f[1], ",")
			if f[0] == "0" || slices.Contains(ctrls, "memory") || slices.Contains(ctrls, "pids") || slices.Contains(ctrls, "cpu") {
				if f[2] != want && !(f[0] == "0" && s.cg.Version == 1) {
					t.Errorf("user process is in cgroup %q of %q, want %q", f[2], f[1], want)
				}
				n++
			}
		}
		if n == 0 {
			t.Errorf("no memory, pids or cpu cgroup in /proc/%d/cgroup:\n%s", pid, b)
		}
	})

	t.Run("rlimits", func(t *testing.T) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Max open files            1024                 1024                 files",
			"Max file size             268435456            268435456            bytes",
			// 1, not 0: the kernel's "never dump", even for a piped core_pattern.
			"Max core file size        1                    1                    bytes",
		} {
			if !strings.Contains(string(b), want) {
				t.Errorf("/proc/%d/limits lacks %q:\n%s", pid, want, b)
			}
		}
	})

	t.Run("mounts", func(t *testing.T) {
		mounts, err := readMountinfo(pid)
		if err != nil {
			t.Fatal(err)
		}
		byPoint := map[string]mountEntry{}
		for _, m := range mounts {
			byPoint[m.point] = m // the last one at a point is the visible one
		}
		has := func(opts []string, o string) bool { return slices.Contains(opts, o) }
		if root, ok := byPoint["/"]; !ok || !has(root.options, "ro") {
			t.Errorf("the root mount is not read-only: %+v", root)
		}
		for _, p := range []string{"/workspace", "/tmp", "/dev/shm"} {
			m, ok := byPoint[p]
			if !ok || !has(m.options, "rw") || !has(m.options, "nosuid") || !has(m.options, "nodev") || m.fstype != "tmpfs" {
				t.Errorf("%s: want a private rw,nosuid,nodev tmpfs, got %+v (present %v)", p, m, ok)
			}
		}
		if m := byPoint["/proc"]; m.fstype != "proc" || !(has(m.super, "hidepid=invisible") || has(m.super, "hidepid=2")) {
			t.Errorf("/proc: want a procfs mounted with hidepid, got %+v", m)
		}
		if m := byPoint["/proc/sys"]; !has(m.options, "ro") {
			t.Errorf("/proc/sys: want it read-only, got %+v", m)
		}
		// Every mount is one of these, and every one but the device
		// nodes and the /proc masks (bound from /dev/null) is nosuid.
		devices := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}
		var masks []string
		for _, m := range []string{"kcore", "keys", "timer_list", "sched_debug", "kallsyms", "kmsg",
			"locks", "cmdline", "config.gz", "diskstats", "interrupts", "softirqs", "partitions", "swaps",
			"modules", "vmallocinfo", "buddyinfo", "zoneinfo", "pagetypeinfo", "schedstat", "key-users"} {
			masks = append(masks, "/proc/"+m)
		}
		allowed := append(append([]string{"/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
			"/proc", "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/pressure",
			"/dev", "/dev/pts", "/dev/shm", "/tmp", "/workspace"}, devices...), masks...)
		for _, e := range goldenEtcIfOnHost {
			allowed = append(allowed, filepath.Join("/etc", e))
		}
		allowed = append(allowed, "/etc/ssl/certs", "/etc/ssl/openssl.cnf")
		for _, m := range mounts {
			if !slices.Contains(allowed, m.point) {
				t.Errorf("unexpected mount in the sandbox: %+v", m)
			}
			if !has(m.options, "nosuid") && !slices.Contains(devices, m.point) && !slices.Contains(masks, m.point) {
				t.Errorf("mount %s is not nosuid: %v", m.point, m.options)
			}
			if !has(m.options, "ro") && m.fstype != "tmpfs" && m.fstype != "proc" && m.fstype != "devpts" &&
				!slices.Contains(devices, m.point) && !slices.Contains(masks, m.point) {
				t.Errorf("host file system mounted writable at %s: %+v", m.point, m)
			}
		}
	})

	t.Run("fds", func(t *testing.T) {
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		var fds []string
		for _, e := range entries {
			fds = append(fds, e.Name())
		}
		if !slices.Equal(fds, []string{"0", "1", "2"}) {
			t.Errorf("the user process holds descriptors %v, want only 0 1 2", fds)
		}
	})

	if err := s.destroy(sb); err != nil {
		t.Errorf("destroy: %v", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Errorf("the exec of sleep did not return within 5 s of Destroy")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		if p, err := readProc(pid); err == nil && p.uids[0] == userUID {
			t.Errorf("the user process (host pid %d) outlived Destroy", pid)
		}
	}
	// The cleanup of s.sandbox checks that nothing else is left.
}
