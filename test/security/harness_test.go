//go:build linux

package security

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/cgroups"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// The host-side layout of the native backend with its default Config. The
// suite uses the defaults on purpose: it checks the product as shipped.
const (
	uidBase     = 1_200_000_000 // native.Config.UIDBase default
	uidsPerSlot = 65536         // host uids of one sandbox
	slotCount   = 4096          // native.Config.Slots default
	runtimeDir  = "/run/kiln"   // native.Config.RuntimeDir default
	cgroupRoot  = "kiln"        // native.Config.CgroupRoot default
)

// kilnSources are the sources of the tmpfs mounts a sandbox makes. None may
// ever appear in the host's mount table.
var kilnSources = []string{"kiln-root", "kiln-tmp", "kiln-workspace", "kiln-dev", "kiln-shm"}

// envCanaryName is set in the test's own environment; no sandbox may see it.
const envCanaryName = "KILN_SECRET_CANARY"

const skipNoRoot = "security suite needs root (sandboxes map to their own host uid ranges and cgroups)"

// suite is the state every test shares: one backend and engine, as a
// service would have, and what the host looked like before any sandbox ran.
type suite struct {
	backend *native.Backend // nil on Docker and Kubernetes
	docker  *dockerSuite    // nil unless on Docker
	kube    kubeBackend     // nil unless on Kubernetes (kubernetes_test.go)
	engine  *engine.Engine
	cg      *cgroups.Host

	secret     string            // contents of the canary secret files
	envSecret  string            // value of envCanaryName
	rootCanary string            // canary directory under /root
	tmpCanary  string            // canary directory under /tmp
	canaries   map[string]string // path -> digest before any sandbox ran
	baseline   map[string]bool   // leftovers already there before the suite ran

	// sandboxes is held shared while a sandbox of the suite exists and
	// exclusively while the host is checked, so that the leftover check
	// never sees the sandbox of a case that is still running.
	sandboxes sync.RWMutex
}

var (
	theSuite   *suite
	skipReason string
	setupErr   error
)

func TestMain(m *testing.M) {
	// The test binary is also the sandbox's PID 1 and its spawn stage.
	agent.Dispatch()
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if os.Geteuid() != 0 {
		skipReason = skipNoRoot
		return m.Run()
	}
	s, err := newSuite()
	if err != nil {
		setupErr = err
	} else {
		theSuite = s
		defer s.removeCanaries()
		if s.docker != nil {
			defer s.docker.close()
		}
		if s.kube != nil {
			defer s.kube.close()
		}
	}
	return m.Run()
}

// env returns the suite, or skips the test without root.
func env(t *testing.T) *suite {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if setupErr != nil {
		t.Fatalf("security suite set-up failed: %v", setupErr)
	}
	if theSuite.kube != nil {
		kubeGate(t)
	}
	return theSuite
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func newSuite() (*suite, error) {
	s := &suite{
		secret:    "KILN-CANARY-SECRET-" + randomHex(16),
		envSecret: "kiln-env-secret-" + randomHex(16),
	}
	if err := os.Setenv(envCanaryName, s.envSecret); err != nil {
		return nil, err
	}
	if err := s.makeCanaries(); err != nil {
		s.removeCanaries()
		return nil, err
	}
	var err error
	if s.canaries, err = s.hashCanaries(); err != nil {
		s.removeCanaries()
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	switch name := os.Getenv(backendEnv); name {
	case "", "native":
		if s.backend, err = native.New(native.Config{}, log); err != nil {
			s.removeCanaries()
			return nil, fmt.Errorf("native backend: %w", err)
		}
		s.engine = engine.New(s.backend, log)
	case "docker":
		if s.docker, err = newDockerSuite(); err != nil {
			s.removeCanaries()
			return nil, fmt.Errorf("docker backend: %w", err)
		}
		s.engine = engine.New(s.docker.b, log)
	case "kubernetes":
		if s.kube, err = newKubeSuite(); err != nil {
			s.removeCanaries()
			return nil, fmt.Errorf("kubernetes backend: %w", err)
		}
		s.engine = engine.New(s.kube.backend(), log)
	default:
		s.removeCanaries()
		return nil, fmt.Errorf("%s=%q: allowed are native (the default), docker and kubernetes (with -tags kubernetes)", backendEnv, name)
	}
	if s.cg, err = cgroups.Detect(); err != nil {
		s.removeCanaries()
		return nil, fmt.Errorf("detect cgroups: %w", err)
	}
	s.cg.RootGroup = cgroupRoot
	left, err := s.leftovers()
	if err != nil {
		s.removeCanaries()
		return nil, err
	}
	s.baseline = map[string]bool{}
	for _, l := range left {
		if l.owner == 0 && l.foreign == "" {
			fmt.Fprintf(os.Stderr, "security suite: already on the host before any test, ignored: %s\n", l.what)
			s.baseline[l.what] = true
		}
	}
	return s, nil
}

// makeCanaries creates a directory under /root and one under /tmp. Both
// hold a file with the secret; the one under /tmp is world-readable, so
// only the sandbox's own view of the file system keeps it out of reach.
func (s *suite) makeCanaries() error {
	var err error
	if s.rootCanary, err = os.MkdirTemp("/root", "kiln-security-canary-"); err != nil {
		return err
	}
	if s.tmpCanary, err = os.MkdirTemp("/tmp", "kiln-security-canary-"); err != nil {
		return err
	}
	if err := os.Chmod(s.tmpCanary, 0o755); err != nil {
		return err
	}
	files := []struct {
		path string
		data string
		mode os.FileMode
	}{
		{filepath.Join(s.rootCanary, "secret.txt"), s.secret + "\n", 0o600},
		{filepath.Join(s.rootCanary, "nested", "notes.txt"), "root canary\n", 0o644},
		{filepath.Join(s.tmpCanary, "secret.txt"), s.secret + "\n", 0o644},
		{filepath.Join(s.tmpCanary, "nested", "notes.txt"), "tmp canary\n", 0o666},
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f.path, []byte(f.data), f.mode); err != nil {
			return err
		}
		if err := os.Chmod(f.path, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func (s *suite) removeCanaries() {
	for _, d := range []string{s.rootCanary, s.tmpCanary} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
}

// canaryPaths are the host files and directories no sandbox may change.
func (s *suite) canaryPaths() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return []string{"/etc/passwd", "/etc/shadow", "/etc/hosts", "/etc/hostname", exe, s.rootCanary, s.tmpCanary}, nil
}

func (s *suite) hashCanaries() (map[string]string, error) {
	paths, err := s.canaryPaths()
	if err != nil {
		return nil, err
	}
	sums := map[string]string{}
	for _, p := range paths {
		sum, err := hashTree(p)
		if err != nil {
			return nil, fmt.Errorf("hash canary %s: %w", p, err)
		}
		sums[p] = sum
	}
	return sums, nil
}

// hashTree is the sha256 of a file, or of a directory tree: every entry's
// relative path, type, permission bits, owner, and contents or link target.
// A missing path hashes to "absent".
func hashTree(root string) (string, error) {
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return "absent", nil
	}
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%q %v %s\n", rel, fi.Mode(), owner(fi))
		switch {
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "-> %q\n", target)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func owner(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
	}
	return "?"
}

// result is how one attack ended.
type result struct {
	Exit    kiln.Exit
	Stdout  string
	Stderr  string
	Err     error         // from engine.Run: the program could not be run
	Elapsed time.Duration // engine.Run as a whole: create, run, destroy
}

func (r result) String() string {
	return fmt.Sprintf("exit code %d, signal %q, limits %v, canceled %v, wall %v, err %v\nstdout:\n%s\nstderr:\n%s",
		r.Exit.Code, r.Exit.Signal, r.Exit.Limits, r.Exit.Canceled, r.Exit.Usage.Wall, r.Err,
		clip(r.Stdout, 4000), clip(r.Stderr, 4000))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("... (%d more bytes)", len(s)-n)
}

// attack runs code as a one-shot program through engine.Run in a fresh
// sandbox, then checks that the host is unchanged, the service healthy and
// nothing of the sandbox left over. It fails the test if the program could
// not be run at all.
func attack(t *testing.T, language, code string, lim kiln.Limits) result {
	t.Helper()
	return attackRun(t, context.Background(), engine.Run{Language: language, Code: code, Limits: lim})
}

// attackRun is attack with a whole engine.Run and a context.
func attackRun(t *testing.T, ctx context.Context, r engine.Run) result {
	t.Helper()
	s := env(t)
	res := s.run(ctx, r)
	s.checkHost(t, r.Language+" attack")
	if res.Err != nil {
		t.Fatalf("engine.Run: %v\n%v", res.Err, res)
	}
	s.checkNoSecrets(t, res.Stdout+res.Stderr)
	return res
}

// run executes r while holding the sandbox lock shared.
func (s *suite) run(ctx context.Context, r engine.Run) result {
	s.sandboxes.RLock()
	defer s.sandboxes.RUnlock()
	var stdout, stderr boundedBuffer
	start := time.Now()
	x, err := s.engine.Run(ctx, r, &stdout, &stderr)
	return result{Exit: x, Stdout: stdout.String(), Stderr: stderr.String(), Err: err, Elapsed: time.Since(start)}
}

// checkNoSecrets fails if output shows the canary secret or the test's own
// secret environment variable.
func (s *suite) checkNoSecrets(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, s.secret) {
		t.Errorf("the sandbox printed the host's canary secret %q", s.secret)
	}
	if strings.Contains(out, s.envSecret) {
		t.Errorf("the sandbox printed the value of the host's %s", envCanaryName)
	}
}

// boundedBuffer keeps the first 32 MiB written to it: far above any output
// limit the suite sets, so a test can see whether the limit held.
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const boundedMax = 32 << 20

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := boundedMax - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// checkHost runs the three checks every case ends with.
func (s *suite) checkHost(t *testing.T, after string) {
	t.Helper()
	s.sandboxes.Lock()
	defer s.sandboxes.Unlock()
	s.checkCanaries(t, after)
	s.checkHealthy(t, after)
	s.checkNothingLeft(t, after)
}

func (s *suite) checkCanaries(t *testing.T, after string) {
	t.Helper()
	for _, p := range s.canaryProblems() {
		t.Errorf("after %s: %s", after, p)
	}
}

// canaryProblems lists the canaries that differ from before the suite ran.
func (s *suite) canaryProblems() []string {
	now, err := s.hashCanaries()
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for p, want := range s.canaries {
		if got := now[p]; got != want {
			out = append(out, fmt.Sprintf("host canary %s changed: sha256 %s, was %s", p, got, want))
		}
	}
	slices.Sort(out)
	return out
}

// checkHealthy requires the backend to still make a sandbox and run a
// program in it within a few seconds.
func (s *suite) checkHealthy(t *testing.T, after string) {
	t.Helper()
	budget := 5 * time.Second
	if s.onDocker() {
		// Creating and starting a container goes through the engine
		// (containerd, runc): about a second when quiet, over 5 s on
		// CI's loaded 2-core machine.
		budget = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var stdout, stderr boundedBuffer
	start := time.Now()
	x, err := s.engine.Run(ctx, engine.Run{Language: "python", Code: `print("ok")`, Limits: kiln.Limits{Timeout: budget}}, &stdout, &stderr)
	took := time.Since(start)
	switch {
	case err != nil:
		t.Errorf("after %s: the service cannot run code any more: %v", after, err)
	case stdout.String() != "ok\n" || x.Code != 0 || len(x.Limits) > 0:
		t.Errorf("after %s: health check printed %q (stderr %q), exit %d, limits %v; want \"ok\\n\", exit 0",
			after, stdout.String(), stderr.String(), x.Code, x.Limits)
	case took > budget:
		t.Errorf("after %s: health check took %v, want under %v", after, took, budget)
	}
}

// checkNothingLeft requires the host to hold nothing of the suite's
// sandboxes. What is found is polled for a short while, and reported if it
// stays. Sandboxes that another process on this machine runs at the same
// time (their processes descend from a process other than this test) are
// not the suite's to judge and are only logged.
func (s *suite) checkNothingLeft(t *testing.T, after string) {
	t.Helper()
	settle := 2 * time.Second
	if s.kube != nil {
		settle = kubeSettle
	}
	start := time.Now()
	deadline := start.Add(settle)
	first := true
	for {
		all, err := s.leftovers()
		if err != nil {
			t.Errorf("after %s: %v", after, err)
			return
		}
		var left, foreign []string
		for _, l := range all {
			switch {
			case s.baseline[l.what]:
			case l.foreign != "":
				foreign = append(foreign, l.what+" ("+l.foreign+")")
			case l.owner == serviceOwner:
				foreign = append(foreign, l.what+" (a kiln service's session workspace)")
			case l.owner != 0 && l.owner != os.Getpid():
				foreign = append(foreign, fmt.Sprintf("%s (a sandbox of host pid %d)", l.what, l.owner))
			default:
				left = append(left, l.what)
			}
		}
		if len(left) == 0 {
			if !first {
				t.Logf("after %s: leftovers took a moment (%v) to disappear after the sandbox was destroyed", after, time.Since(start).Round(10*time.Millisecond))
			}
			if len(foreign) > 0 {
				t.Logf("after %s: ignored sandboxes of other processes on this host:\n  %s", after, strings.Join(foreign, "\n  "))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("after %s: left on the host %v after the sandbox was destroyed:\n  %s", after, settle, strings.Join(left, "\n  "))
			return
		}
		first = false
		time.Sleep(50 * time.Millisecond)
	}
}

// leftover is one trace of a sandbox on the host. owner is the host pid of
// the process that created the sandbox, when it can be told, else 0.
type leftover struct {
	what    string
	owner   int
	foreign string // Docker: whose it is when it is not the suite's
}

// leftovers lists what of any sandbox is on the host: processes in the
// sandbox uid range, mounts of the runtime directory or of kiln's tmpfs,
// cgroups under the root group, entries in the stage directory. On
// Docker: the suite's containers, volumes, processes, mounts and cgroups
// (dockerSuite.leftovers).
func (s *suite) leftovers() ([]leftover, error) {
	if s.kube != nil {
		return s.kube.leftovers()
	}
	if s.onDocker() {
		return s.docker.leftovers()
	}
	procs, err := sandboxProcs(0, 0)
	if err != nil {
		return nil, err
	}
	var left []leftover
	for _, p := range procs {
		owner := creator(p.pid)
		if _, err := readProc(p.pid); owner == 0 && err != nil {
			continue // it exited while its parents were read: not left
		}
		left = append(left, leftover{what: p.String(), owner: owner})
	}
	mounts, err := kilnMounts()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		owner := 0
		if serviceWorkspace(m) {
			owner = serviceOwner
		}
		left = append(left, leftover{what: m, owner: owner})
	}
	ids, err := s.cg.Orphans()
	if err != nil {
		return nil, fmt.Errorf("list cgroups: %w", err)
	}
	for _, id := range ids {
		left = append(left, leftover{what: "cgroup " + cgroupRoot + "/" + id, owner: s.groupOwner(id)})
	}
	entries, err := os.ReadDir(filepath.Join(runtimeDir, "stage"))
	if err != nil {
		return nil, fmt.Errorf("read stage directory: %w", err)
	}
	for _, e := range entries {
		left = append(left, leftover{what: "stage entry " + e.Name()})
	}
	return left, nil
}

// inSandboxRange reports whether uid belongs to a sandbox of the default
// config.
func inSandboxRange(uid uint32) bool {
	return uid >= uidBase && uid < uidBase+slotCount*uidsPerSlot
}

// creator walks up from a sandbox process to the first ancestor outside
// the sandbox uid range: the process that created the sandbox (every
// process of a sandbox descends from its PID 1, whose parent is the
// creator). It returns 0 if the chain cannot be followed.
func creator(pid int) int {
	for range 64 {
		p, err := readProc(pid)
		if err != nil {
			return 0
		}
		if !inSandboxRange(p.uids[0]) {
			return pid
		}
		st, err := procStatus(pid)
		if err != nil {
			return 0
		}
		pid, err = strconv.Atoi(st["PPid"])
		if err != nil || pid == 0 {
			return 0
		}
	}
	return 0
}

// groupOwner is the creator of the sandbox whose cgroup is id, told from
// the processes in it; 0 if the group is empty.
func (s *suite) groupOwner(id string) int {
	// The kiln process that made the sandbox holds its live file's flock
	// from before the cgroup is made until after it is removed, so it owns
	// a cgroup that has no process yet (being made) or no more (being
	// torn down) too.
	if pid := liveHolder(id); pid != 0 {
		return pid
	}
	for _, sub := range []string{"agent", "user"} {
		b, _ := os.ReadFile(filepath.Join(s.cg.Mounts.Memory, cgroupRoot, id, sub, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				if c := creator(pid); c != 0 {
					return c
				}
			}
		}
	}
	return 0
}

// liveHolder is the pid holding the flock on sandbox id's live file
// (/run/kiln/live/<id>, native's markLive), or 0.
func liveHolder(id string) int {
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(runtimeDir, "live", id), &st) != nil {
		return 0
	}
	b, _ := os.ReadFile("/proc/locks")
	// "1: FLOCK  ADVISORY  WRITE 1234 00:19:5678 0 EOF"; a waiter's line
	// has "->" after the number and holds nothing.
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		dev := strings.Split(f[5], ":")
		pid, perr := strconv.Atoi(f[4])
		ino, ierr := strconv.ParseUint(dev[len(dev)-1], 10, 64)
		if perr == nil && ierr == nil && ino == st.Ino {
			return pid
		}
	}
	return 0
}

// hostProc is a process seen from the host.
type hostProc struct {
	pid  int
	name string
	uids [4]uint32 // real, effective, saved, fs
}

func (p hostProc) String() string {
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
	return fmt.Sprintf("process %d (%s) uid %d: %q", p.pid, p.name, p.uids[0], strings.ReplaceAll(string(cmd), "\x00", " "))
}

// sandboxProcs lists host processes with any uid in [lo, hi); hi == 0 means
// the whole sandbox uid range of the default config.
func sandboxProcs(lo, hi uint32) ([]hostProc, error) {
	if hi == 0 {
		lo, hi = uidBase, uidBase+slotCount*uidsPerSlot
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []hostProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readProc(pid)
		if err != nil {
			continue // it exited
		}
		for _, u := range p.uids {
			if u >= lo && u < hi {
				out = append(out, p)
				break
			}
		}
	}
	return out, nil
}

func readProc(pid int) (hostProc, error) {
	p := hostProc{pid: pid}
	st, err := procStatus(pid)
	if err != nil {
		return p, err
	}
	p.name = st["Name"]
	f := strings.Fields(st["Uid"])
	if len(f) != 4 {
		return p, fmt.Errorf("pid %d: Uid line %q", pid, st["Uid"])
	}
	for i := range f {
		u, err := strconv.ParseUint(f[i], 10, 32)
		if err != nil {
			return p, err
		}
		p.uids[i] = uint32(u)
	}
	return p, nil
}

// procStatus parses /proc/PID/status into its fields.
func procStatus(pid int) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		if ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, nil
}

// serviceOwner is the owner of a leftover that is a kiln service's own: the
// tmpfs workspace of a session, which a service mounts in the host's mount
// namespace under <data>/workspaces/<id> (a `kiln serve` running on the
// same machine). The suite's sandboxes never mount in the host's namespace,
// so such a mount is not theirs; one of their mounts that leaked would sit
// under the runtime directory.
const serviceOwner = -1

var serviceWorkspaceRE = regexp.MustCompile(`^/.+/workspaces/[0-9a-f]{32}$`)

// serviceWorkspace reports whether a "mount ..." leftover is a kiln
// service's tmpfs session workspace.
func serviceWorkspace(m string) bool {
	fields := strings.Fields(strings.TrimPrefix(m, "mount "))
	sep := slices.Index(fields, "-")
	if sep < 5 || len(fields) < sep+3 {
		return false
	}
	point := fields[4]
	return fields[sep+2] == "kiln-workspace" && serviceWorkspaceRE.MatchString(point) && !strings.HasPrefix(point, runtimeDir+"/")
}

// kilnMounts lists the host's mounts that mention the runtime directory or
// have one of kiln's tmpfs sources.
func kilnMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 0 || len(fields) < sep+3 {
			return nil, fmt.Errorf("mountinfo: malformed line %q", line)
		}
		if strings.Contains(line, runtimeDir) || slices.Contains(kilnSources, fields[sep+2]) {
			out = append(out, "mount "+line)
		}
	}
	return out, sc.Err()
}

// sandbox creates a sandbox directly with the suite's backend, for cases
// that need more than one exec or a look from the host. Cleanup destroys
// it, checks that it is gone, and runs the host checks.
func (s *suite) sandbox(t *testing.T, spec native.Spec) *box {
	t.Helper()
	s.sandboxes.RLock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := s.create(ctx, spec)
	if err != nil {
		s.sandboxes.RUnlock()
		t.Fatalf("create sandbox: %v", err)
	}
	t.Cleanup(func() {
		err := s.destroy(sb)
		s.sandboxes.RUnlock()
		if err != nil {
			t.Errorf("destroy sandbox %s: %v", sb.ID, err)
		}
		s.checkGone(t, sb)
		s.checkHost(t, "sandbox "+sb.ID)
	})
	return sb
}

// create makes a sandbox with the suite's backend.
func (s *suite) create(ctx context.Context, spec native.Spec) (*box, error) {
	if s.kube != nil {
		return s.kube.create(ctx, spec)
	}
	if s.onDocker() {
		return s.docker.create(ctx, spec)
	}
	sb, err := s.backend.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &box{ID: sb.ID, Agent: sb.Agent, InitPID: sb.InitPID, HostUID: sb.HostUID, UserUID: sb.HostUID + native.UserUID, native: sb}, nil
}

func (s *suite) destroy(b *box) error {
	if s.kube != nil {
		return s.kube.destroy(b)
	}
	if s.onDocker() {
		return s.docker.destroy(b)
	}
	return b.native.Destroy(context.Background())
}

// checkGone requires every trace of one destroyed sandbox to be gone: its
// PID 1, every process in its uid range, its cgroups.
func (s *suite) checkGone(t *testing.T, sb *box) {
	t.Helper()
	if s.kube != nil {
		s.kube.checkGone(t, sb)
		return
	}
	if s.onDocker() {
		s.checkGoneDocker(t, sb)
		return
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", sb.InitPID)); err == nil {
		if p, err := readProc(sb.InitPID); err == nil && p.uids[0] == sb.HostUID {
			t.Errorf("sandbox %s: its PID 1 (host pid %d) still runs after Destroy", sb.ID, sb.InitPID)
		}
	}
	procs, err := sandboxProcs(sb.HostUID, sb.HostUID+uidsPerSlot)
	if err != nil {
		t.Error(err)
	}
	for _, p := range procs {
		t.Errorf("sandbox %s: %v still runs after Destroy", sb.ID, p)
	}
	ids, err := s.cg.Orphans()
	if err != nil {
		t.Error(err)
	}
	if slices.Contains(ids, sb.ID) {
		t.Errorf("sandbox %s: its cgroup %s/%s is still there after Destroy", sb.ID, cgroupRoot, sb.ID)
	}
}

// userProcs lists the host processes running as sb's user.
func userProcs(t *testing.T, sb *box) []hostProc {
	t.Helper()
	if sb.cid != "" {
		return dockerUserProcs(t, sb)
	}
	uid := sb.UserUID
	procs, err := sandboxProcs(uid, uid+1)
	if err != nil {
		t.Fatal(err)
	}
	return procs
}

// execIn runs argv in sb and returns its output and exit. It fails the
// test if the agent could not run it.
func execIn(t *testing.T, sb *box, timeout time.Duration, argv ...string) (string, string, protocol.ExitInfo) {
	t.Helper()
	stdout, stderr, info, err := tryExec(sb, timeout, argv...)
	if err != nil {
		t.Fatalf("exec %q in sandbox %s: %v", argv, sb.ID, err)
	}
	return stdout, stderr, info
}

// tryExec is execIn for goroutines other than the test's.
func tryExec(sb *box, timeout time.Duration, argv ...string) (string, string, protocol.ExitInfo, error) {
	var stdout, stderr boundedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	info, err := sb.Agent.Exec(ctx, protocol.Exec{Argv: argv, TimeoutMs: timeout.Milliseconds(), OutputBytes: 1 << 20}, &stdout, &stderr)
	return stdout.String(), stderr.String(), info, err
}

// lines splits output into lines, without the final newline.
func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func itoa(n int) string { return strconv.Itoa(n) }
