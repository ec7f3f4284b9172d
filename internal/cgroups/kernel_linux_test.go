package cgroups

// Tests against the real kernel. They need root and usable cgroups and skip
// with the reason otherwise; CI runs them as root. Their groups live under a
// root group of their own, which TestMain checks is empty and removes at the
// end.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

const (
	// The test binary runs itself as a helper inside a sandbox group when
	// helperModeEnv is set, with the HandleSpec in helperSpecEnv.
	helperModeEnv = "KILN_CGROUPS_TEST_HELPER"
	helperSpecEnv = "KILN_CGROUPS_TEST_SPEC"

	nobody = 65534
)

var testRootGroup = fmt.Sprintf("kiln-test-%d", os.Getpid())

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperModeEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	code := m.Run()
	if err := removeTestRoots(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// removeTestRoots checks that the tests left no group behind in any cgroup
// hierarchy, and removes the tests' root groups.
func removeTestRoots() error {
	if os.Geteuid() != 0 {
		return nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil // not Linux as we know it: the tests skipped too
	}
	defer f.Close()
	mounts, err := parseMountinfo(f)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if m.fstype != "cgroup" && m.fstype != "cgroup2" {
			continue
		}
		dir := filepath.Join(m.mountPoint, testRootGroup)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				errs = append(errs, fmt.Errorf("tests left group %s behind", filepath.Join(dir, e.Name())))
			}
		}
		if err := rmdir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runHelper is the test binary as a sandboxed process: it rebuilds the
// Handles from inherited descriptors, joins user/ (except in mode usage)
// and does what mode says.
func runHelper(mode string, args []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 100
	}
	var spec HandleSpec
	if err := json.Unmarshal([]byte(os.Getenv(helperSpecEnv)), &spec); err != nil {
		return fail(err)
	}
	if os.Geteuid() == 0 {
		return fail(errors.New("running as root; the tests want the sandbox side unprivileged"))
	}
	h, err := FromSpec(spec)
	if err != nil {
		return fail(err)
	}
	if mode == "usage" {
		before, err := h.Usage()
		if err != nil {
			return fail(err)
		}
		if err := h.ResetPeak(); err != nil {
			return fail(err)
		}
		after, err := h.Usage()
		if err != nil {
			return fail(err)
		}
		if err := json.NewEncoder(os.Stdout).Encode([]Usage{before, after}); err != nil {
			return fail(err)
		}
		return 0
	}
	if err := h.Join(); err != nil {
		return fail(err)
	}
	switch mode {
	case "exec":
		return fail(syscall.Exec(args[0], args, os.Environ()))
	case "hog":
		var keep [][]byte
		for range 256 {
			b := make([]byte, 4<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Printf("allocated %d MiB and was not killed\n", len(keep)*4)
		return 0
	case "spin":
		deadline := time.Now().Add(time.Second)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(deadline) {
				}
			})
		}
		wg.Wait()
		return 0
	}
	return fail(fmt.Errorf("unknown mode %q", mode))
}

// realHost is this machine's cgroups, with the tests' own root group.
func realHost(t *testing.T) *Host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups (CI runs this as root)")
	}
	h, err := Detect()
	if err != nil {
		t.Skipf("no usable cgroups here: %v", err)
	}
	// Writes through handles opened by root need Linux 5.16.
	if !kernelAtLeast(t, 5, 16) {
		t.Skipf("needs Linux 5.16 or later for writes through inherited cgroup handles; this is %s", kernelRelease(t))
	}
	h.RootGroup = testRootGroup
	t.Logf("%s", h.Describe())
	return h
}

func kernelRelease(t *testing.T) string {
	t.Helper()
	var u unix.Utsname
	must(t, unix.Uname(&u))
	return unix.ByteSliceToString(u.Release[:])
}

// kernelAtLeast reports whether the running kernel is Linux major.minor or
// later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var haveMajor, haveMinor int
	fmt.Sscanf(kernelRelease(t), "%d.%d", &haveMajor, &haveMinor)
	return haveMajor > major || haveMajor == major && haveMinor >= minor
}

// create makes a group and, at the end of the test, destroys it and checks
// that nothing of it is left.
func create(t *testing.T, h *Host, id string, user Limits) *Group {
	t.Helper()
	g, err := h.Create(id, user, DefaultAgentLimits())
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := g.Destroy(ctx); err != nil {
			t.Errorf("Destroy: %v", err)
		}
		checkGone(t, g)
	})
	return g
}

func checkGone(t *testing.T, g *Group) {
	t.Helper()
	for _, d := range g.dirs("") {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left after Destroy (stat: %v)", d, err)
		}
	}
	ids, err := g.host.Orphans()
	if err != nil {
		t.Errorf("Orphans: %v", err)
	}
	if slices.Contains(ids, g.ID()) {
		t.Errorf("Orphans() = %q after Destroy, still lists %s", ids, g.ID())
	}
}

// helperBinary is a copy of the test binary that user nobody can run.
func helperBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kiln-cgroups-test-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	self, err := os.Executable()
	must(t, err)
	src, err := os.Open(self)
	must(t, err)
	defer src.Close()
	path := filepath.Join(dir, "helper")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	must(t, err)
	_, err = io.Copy(dst, src)
	must(t, errors.Join(err, dst.Close()))
	return path
}

type helper struct {
	cmd *exec.Cmd
	out *os.File
}

// startHelper runs the test binary as user nobody in mode, with hs passed
// in as inherited descriptors 3 and up, and closes the host's copies.
func startHelper(t *testing.T, hs *Handles, mode string, args ...string) *helper {
	t.Helper()
	defer hs.Close()
	spec, err := json.Marshal(hs.Spec(3))
	must(t, err)
	out, err := os.CreateTemp(t.TempDir(), "out")
	must(t, err)
	cmd := exec.Command(helperBinary(t), args...)
	cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, helperSpecEnv+"="+string(spec))
	cmd.ExtraFiles = hs.Files()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	must(t, cmd.Start())
	return &helper{cmd: cmd, out: out}
}

func (h *helper) wait() (output string, err error) {
	err = h.cmd.Wait()
	b, _ := os.ReadFile(h.out.Name())
	return string(b), err
}

func openHandles(t *testing.T, g *Group) *Handles {
	t.Helper()
	hs, err := g.OpenHandles()
	if err != nil {
		t.Fatalf("OpenHandles: %v", err)
	}
	return hs
}

func wantKilled(t *testing.T, what string, err error, output string) {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return
		}
	}
	t.Errorf("%s: wait = %v, want killed by SIGKILL; output:\n%s", what, err, output)
}

func TestKernelMemoryLimit(t *testing.T) {
	h := realHost(t)
	const limit = 64 << 20
	g := create(t, h, "memory", Limits{MemoryBytes: limit, Pids: 16})

	hog := startHelper(t, openHandles(t, g), "hog")
	out, err := hog.wait()
	wantKilled(t, "process allocating 1 GiB in a 64 MiB group", err, out)

	stats, err := g.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	t.Logf("Stats() = %+v", stats)
	if stats.OOMKills < 1 {
		t.Errorf("Stats().OOMKills = %d, want at least 1", stats.OOMKills)
	}
	// The kernel may charge a few pages past the limit (forced charges
	// while the OOM victim exits).
	if p := stats.PeakMemoryBytes; p < limit-8<<20 || p > limit+1<<20 {
		t.Errorf("Stats().PeakMemoryBytes = %d, want near the limit %d", p, limit)
	}
	hs := openHandles(t, g)
	defer hs.Close()
	u, err := hs.Usage()
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	if diff := cmp.Diff(stats, u); diff != "" {
		t.Errorf("Usage() through handles differs from Stats() (-stats +usage):\n%s", diff)
	}

	// The same, read and reset unprivileged through inherited handles.
	reader := startHelper(t, openHandles(t, g), "usage")
	out, err = reader.wait()
	if err != nil {
		t.Fatalf("usage helper: %v\n%s", err, out)
	}
	var got []Usage
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 2 {
		t.Fatalf("usage helper printed %q: %v", out, err)
	}
	if diff := cmp.Diff(stats, got[0]); diff != "" {
		t.Errorf("Usage() in the sandbox differs from Stats() (-stats +usage):\n%s", diff)
	}
	switch {
	case h.Version == V2 && !kernelAtLeast(t, 6, 12):
		// memory.peak is read-only before Linux 6.12: ResetPeak does nothing.
		if got[1].PeakMemoryBytes != got[0].PeakMemoryBytes {
			t.Errorf("after ResetPeak on %s PeakMemoryBytes = %d, want it unchanged at %d", kernelRelease(t), got[1].PeakMemoryBytes, got[0].PeakMemoryBytes)
		}
	case got[1].PeakMemoryBytes >= got[0].PeakMemoryBytes:
		t.Errorf("after ResetPeak PeakMemoryBytes = %d, want below %d", got[1].PeakMemoryBytes, got[0].PeakMemoryBytes)
	}
}

func TestKernelPidsLimit(t *testing.T) {
	h := realHost(t)
	g := create(t, h, "pids", Limits{MemoryBytes: 64 << 20, Pids: 16})

	// The shell first checks that no handle leaked into it through exec,
	// then starts 40 sleeps; dash gives up (status 2) when fork fails.
	const script = `for fd in 3 4 5 6 7 8 9 10; do
	if [ -e /proc/self/fd/$fd ]; then echo "descriptor $fd leaked into exec"; exit 9; fi
done
i=0
while [ $i -lt 40 ]; do sleep 30 & i=$((i+1)); done
wait`
	sh := startHelper(t, openHandles(t, g), "exec", "/bin/sh", "-c", script)
	out, err := sh.wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 9 || ee.ExitCode() == 100 {
		t.Fatalf("shell forking 40 times in a 16 pids group: wait = %v, want a failed fork; output:\n%s", err, out)
	}

	stats, err := g.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	t.Logf("Stats() = %+v", stats)
	if stats.PidsLimitHits < 1 {
		t.Errorf("Stats().PidsLimitHits = %d, want at least 1", stats.PidsLimitHits)
	}
	hs := openHandles(t, g)
	defer hs.Close()
	if u, err := hs.Usage(); err != nil || u.PidsLimitHits != stats.PidsLimitHits {
		t.Errorf("Usage() = %+v, %v; want PidsLimitHits %d", u, err, stats.PidsLimitHits)
	}

	// The sleeps live on in user/: Destroy kills them.
	pids, err := listProcs(g.dirs("user"))
	must(t, err)
	if len(pids) < 8 || len(pids) > 16 {
		t.Errorf("user/ holds %d processes, want up to the limit of 16", len(pids))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	checkGone(t, g)
}

func TestKernelDestroyForkBomb(t *testing.T) {
	h := realHost(t)
	g := create(t, h, "bomb", Limits{MemoryBytes: 256 << 20, Pids: 32})

	agent := exec.Command("/bin/sleep", "1000")
	must(t, agent.Start())
	if err := g.AddAgent(agent.Process.Pid); err != nil {
		agent.Process.Kill()
		t.Fatalf("AddAgent: %v", err)
	}
	procs, err := os.ReadFile(filepath.Join(g.dirs("agent")[0], "cgroup.procs"))
	must(t, err)
	if strings.TrimSpace(string(procs)) != strconv.Itoa(agent.Process.Pid) {
		t.Errorf("agent/cgroup.procs = %q, want the agent's pid %d", procs, agent.Process.Pid)
	}

	// Every process forks for ever, retrying when the pids limit says no.
	argv := []string{"/usr/bin/python3", "-c", `import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.001)
`}
	if _, err := os.Stat(argv[0]); err != nil {
		// Not a bomb that lasts (dash gives up when fork fails), but it leaves
		// the group full of processes.
		t.Logf("no %s (%v): using sh", argv[0], err)
		argv = []string{"/bin/sh", "-c", "while :; do sleep 1000 & done"}
	}
	bomb := startHelper(t, openHandles(t, g), "exec", argv...)
	t.Logf("fork bomb: %q", argv)
	for deadline := time.Now().Add(10 * time.Second); ; {
		stats, err := g.Stats()
		must(t, err)
		if stats.PidsLimitHits > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fork bomb did not reach the pids limit in 10s: %+v", stats)
		}
		time.Sleep(10 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := g.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	t.Logf("Destroy took %v", time.Since(start))
	wantKilled(t, "agent", agent.Wait(), "")
	if argv[0] != "/bin/sh" {
		out, err := bomb.wait()
		wantKilled(t, "fork bomb", err, out)
	} else {
		bomb.wait()
	}
	checkGone(t, g)
	if err := g.Destroy(ctx); err != nil {
		t.Errorf("second Destroy = %v, want nil", err)
	}
}

func TestKernelCPULimit(t *testing.T) {
	h := realHost(t)
	g := create(t, h, "cpu", Limits{MemoryBytes: 256 << 20, Pids: 64, CPUMillis: 200})

	spin := startHelper(t, openHandles(t, g), "spin")
	if out, err := spin.wait(); err != nil {
		t.Fatalf("spin helper: %v\n%s", err, out)
	}
	stats, err := g.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	// Four threads spinning for a second under a fifth of a CPU: about
	// 200ms, give or take a period. Uncapped, even on a busy two-CPU machine,
	// they get well over 800ms.
	if stats.CPUTime < 50*time.Millisecond || stats.CPUTime > 450*time.Millisecond {
		t.Errorf("Stats().CPUTime = %v after spinning 1s at 200 millis, want about 200ms", stats.CPUTime)
	}
	t.Logf("CPU time after spinning four threads for 1s at 200 millis: %v", stats.CPUTime)
}

// On a v1 host, the cgroup2 mount has no controllers but does have
// cgroup.procs and cgroup.kill: enough to check joining through an
// inherited handle and Destroy on v2 for real. (On a v2 host the other
// tests cover it.)
func TestKernelV2WithoutControllers(t *testing.T) {
	h := realHost(t)
	if h.Version == V2 {
		t.Skip("this host is cgroup v2: the other kernel tests cover it")
	}
	f, err := os.Open("/proc/self/mountinfo")
	must(t, err)
	mounts, err := parseMountinfo(f)
	f.Close()
	must(t, err)
	i := slices.IndexFunc(mounts, func(m mount) bool { return m.fstype == "cgroup2" && !m.readOnly })
	if i < 0 {
		t.Skip("no writable cgroup2 mount")
	}
	mp := mounts[i].mountPoint
	v2 := &Host{Version: V2, Mounts: Mounts{Memory: mp, Pids: mp, CPU: mp, CPUAcct: mp}, RootGroup: testRootGroup, fs: h.fs}
	g, err := v2.Group("v2")
	must(t, err)
	for _, d := range []string{filepath.Join(mp, testRootGroup), g.dirs("")[0], g.dirs("agent")[0], g.dirs("user")[0]} {
		if err := mkdir(d); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := g.Destroy(context.Background()); err != nil {
			t.Errorf("Destroy: %v", err)
		}
		checkGone(t, g)
	})
	user := g.dirs("user")[0]
	if _, err := os.Stat(filepath.Join(user, "cgroup.kill")); err != nil {
		t.Skipf("no cgroup.kill (Linux 5.14): %v", err)
	}

	agent := exec.Command("/bin/sleep", "1000")
	must(t, agent.Start())
	if err := g.AddAgent(agent.Process.Pid); err != nil {
		agent.Process.Kill()
		t.Fatalf("AddAgent: %v", err)
	}
	// Handles with cgroup.procs, and files that exist without controllers
	// standing in for the statistics.
	hs := &Handles{version: V2}
	open := func(name string, flag int) *os.File {
		f, err := os.OpenFile(filepath.Join(user, name), flag, 0)
		must(t, err)
		return f
	}
	hs.procs = []*os.File{open("cgroup.procs", os.O_WRONLY)}
	hs.stats = [numStats]*os.File{statOOM: open("cgroup.events", os.O_RDONLY), statPids: open("cgroup.stat", os.O_RDONLY), statCPU: open("cpu.stat", os.O_RDONLY)}
	sleeper := startHelper(t, hs, "exec", "/bin/sleep", "1000")

	var pids []int
	for deadline := time.Now().Add(5 * time.Second); len(pids) == 0 && time.Now().Before(deadline); {
		pids, err = listProcs([]string{user})
		must(t, err)
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Equal(pids, []int{sleeper.cmd.Process.Pid}) {
		t.Errorf("user/cgroup.procs = %v, want the helper %d, joined as nobody through the inherited handle", pids, sleeper.cmd.Process.Pid)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	wantKilled(t, "agent", agent.Wait(), "")
	out, err := sleeper.wait()
	wantKilled(t, "helper in user/", err, out)
	checkGone(t, g)
}
