package main

// End-to-end tests of the kiln command. TestMain builds the real binary once,
// the way a user gets it, and the tests drive it with os/exec: stdin from a
// byte slice or /dev/null (never a terminal), a 20 s deadline on every
// command, and the exit status and both streams checked the way a user
// would check them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/kiln-dev/kiln/internal/lang"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/agent"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// testVersion is stamped into the binary under test with -ldflags -X.
const testVersion = "e2e-test"

// kilnBin is the binary built by TestMain, in a 0755 directory so that an
// unprivileged user can run it too.
var kilnBin string

func TestMain(m *testing.M) {
	// The tests run the built binary, which dispatches its own sandbox
	// stages; this keeps the test binary right should a test ever make a
	// sandbox in-process.
	agent.Dispatch()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kiln-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kilnBin = filepath.Join(dir, "kiln")
	build := exec.Command("go", "build", "-o", kilnBin, "-ldflags", "-X main.version="+testVersion+" -X main.installedAdminKey="+filepath.Join(dir, "no-admin.key"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kiln: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// needRoot skips tests that make sandboxes when not root.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
}

// invocation is one run of the kiln binary.
type invocation struct {
	dir   string              // working directory; default a fresh temp dir
	stdin []byte              // nil means /dev/null
	cred  *syscall.Credential // run as another user
	env   []string            // added to the environment
}

type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// execKiln runs the binary with args and fails the test if it hangs, cannot be
// started or panics.
func execKiln(t testing.TB, inv invocation, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kilnBin, args...)
	cmd.WaitDelay = 2 * time.Second
	cmd.Dir = inv.dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	if inv.stdin != nil {
		cmd.Stdin = bytes.NewReader(inv.stdin)
	}
	if inv.env != nil {
		cmd.Env = append(os.Environ(), inv.env...)
	}
	if inv.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: inv.cred}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("kiln %q did not finish within 20 s\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kiln %q: %v", args, err)
	}
	if strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("kiln %q panicked:\n%s", args, r.stderr)
	}
	return r
}

// checkNoLeftovers fails the test if a process of the binary under test
// outlives the kiln command that started it: a sandbox's PID 1 and every
// kiln stage inside it run that binary, so a leaked sandbox shows up here.
// No test runs in parallel, so any such process belongs to a finished run.
func checkNoLeftovers(t testing.TB) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		ents, err := os.ReadDir("/proc")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
			if err == nil && strings.TrimSuffix(exe, " (deleted)") == kilnBin {
				cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
				left = append(left, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("kiln processes still running after the command returned:\n%s", strings.Join(left, "\n"))
	}
}

// golden compares got with testdata/<name>.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\ngot:  %q\nwant: %q", file, got, want)
	}
}

func TestVersion(t *testing.T) {
	r := execKiln(t, invocation{}, "version")
	if want := "kiln " + testVersion + "\n"; r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Errorf("kiln version: exit %d, stdout %q, stderr %q; want exit 0, stdout %q, no stderr", r.code, r.stdout, r.stderr, want)
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"help", "-h", "--help"} {
		r := execKiln(t, invocation{}, arg)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("kiln %s: exit %d, stderr %q; want exit 0 and no stderr", arg, r.code, r.stderr)
		}
		for _, want := range []string{"kiln run [flags] FILE", "--lang L -c CODE", "kiln doctor", "kiln version"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("kiln %s: usage lacks %q:\n%s", arg, want, r.stdout)
			}
		}
		// kiln serve serves the notebook (web/), which the usage names.
		if !strings.Contains(r.stdout, "web notebook") {
			t.Errorf("kiln %s: usage does not say that kiln serve serves the web notebook:\n%s", arg, r.stdout)
		}
		golden(t, "usage/help", r.stdout)
	}
}

// TestDoctor checks that `kiln doctor` tells the truth about this machine:
// every value it prints is read here independently and compared.
func TestDoctor(t *testing.T) {
	r := execKiln(t, invocation{}, "doctor")
	out := r.stdout
	wantCode := 0
	if os.Geteuid() != 0 {
		wantCode = 1 // the verdict fails without root
	}
	if r.code != wantCode {
		t.Errorf("kiln doctor exited %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, wantCode, out, r.stderr)
	}

	var fs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &fs); err != nil {
		t.Fatal(err)
	}
	cgroupWant := "cgroup v1"
	if fs.Type == unix.CGROUP2_SUPER_MAGIC {
		cgroupWant = "cgroup v2"
	}
	if !strings.Contains(out, "cgroups: "+cgroupWant) {
		t.Errorf("doctor does not say %q (what /sys/fs/cgroup is here):\n%s", cgroupWant, out)
	}

	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno == 0 {
		if want := fmt.Sprintf("Landlock ABI %d ", abi); !strings.Contains(out, want) {
			t.Errorf("the kernel reports Landlock ABI %d; doctor does not say %q:\n%s", abi, want, out)
		}
	} else if !strings.Contains(out, "Landlock: this kernel has none") {
		t.Errorf("the kernel has no Landlock (%v); doctor does not say so:\n%s", errno, out)
	}

	for _, rt := range []struct{ name, bin string }{
		{"python", "/usr/bin/python3"}, {"javascript", "/usr/bin/node"}, {"bash", "/usr/bin/bash"},
	} {
		v, err := exec.Command(rt.bin, "--version").Output()
		if err != nil {
			t.Errorf("%s --version: %v", rt.bin, err)
			continue
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(v)), "\n")
		if !lineWith(out, "ok", rt.name, first, rt.bin) {
			t.Errorf("doctor has no line saying %s is %q at %s:\n%s", rt.name, first, rt.bin, out)
		}
	}

	for _, s := range []struct{ name, file string }{
		{"kernel.io_uring_disabled", "/proc/sys/kernel/io_uring_disabled"},
		{"dev.tty.legacy_tiocsti", "/proc/sys/dev/tty/legacy_tiocsti"},
	} {
		b, err := os.ReadFile(s.file)
		if err != nil {
			if !strings.Contains(out, s.name+" (not on this kernel)") {
				t.Errorf("%s is absent here; doctor does not say so:\n%s", s.name, out)
			}
			continue
		}
		if want := s.name + " = " + strings.TrimSpace(string(b)); !strings.Contains(out, want) {
			t.Errorf("doctor does not say %q (the value in %s):\n%s", want, s.file, out)
		}
	}

	verdict := "Verdict: this host can run kiln sandboxes."
	if wantCode != 0 {
		verdict = "Verdict: kiln cannot run sandboxes here."
	}
	if !strings.Contains(out, verdict) {
		t.Errorf("doctor does not say %q:\n%s", verdict, out)
	}
}

// lineWith reports whether one line of out contains every part, in order.
func lineWith(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return true
		}
	}
	return false
}

// TestNotRootRefused runs kiln as an ordinary user (nobody, when the test
// runs as root): it must refuse with one line that says root is needed, not
// fail somewhere deeper.
func TestNotRootRefused(t *testing.T) {
	inv := invocation{dir: "/"}
	if os.Geteuid() == 0 {
		for d := filepath.Dir(kilnBin); d != "/"; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
				t.Skipf("uid 65534 cannot reach the test binary: %s is not searchable by others (set TMPDIR)", d)
			}
		}
		inv.cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	r := execKiln(t, inv, "run", "--lang", "python", "-c", "print(1)")
	if r.code != 125 {
		t.Errorf("exit %d, want 125\nstderr: %s", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "kiln: ") || !strings.Contains(lines[0], "must run as root") {
		t.Errorf("stderr should be one line starting with \"kiln: \" that says kiln must run as root; got:\n%s", r.stderr)
	}
}

// TestLanguages: every language kiln runs is listed with its version; CI
// installs them all, so the command succeeds.
func TestLanguages(t *testing.T) {
	r := execKiln(t, invocation{}, "languages")
	if r.code != 0 {
		t.Fatalf("kiln languages exited %d: %s%s", r.code, r.stdout, r.stderr)
	}
	for _, name := range lang.Names() {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s+(repl|program)\s+/\S+\s+\S`).MatchString(r.stdout) {
			t.Errorf("kiln languages does not list %s with a runtime and version:\n%s", name, r.stdout)
		}
	}
}

func TestVersionJSON(t *testing.T) {
	r := execKiln(t, invocation{}, "version", "--json")
	var v struct{ Version, Go string }
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil || v.Version != testVersion || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("kiln version --json: exit %d, stdout %q (%v), stderr %q; want {\"version\": %q, \"go\": ...}", r.code, r.stdout, err, r.stderr, testVersion)
	}
	if r := execKiln(t, invocation{}, "version", "--frob"); r.code != 2 {
		t.Errorf("kiln version --frob: exit %d, want 2", r.code)
	}
}

// TestHelpLayout: every command's -h starts with its usage line and names
// each flag's default once.
func TestHelpLayout(t *testing.T) {
	for _, args := range [][]string{
		{"serve"}, {"bench"}, {"run"}, {"repl"}, {"exec"}, {"version"},
		{"session", "create"}, {"session", "ls"}, {"files", "put"}, {"files", "rm"}, {"history"},
	} {
		r := execKiln(t, invocation{}, append(args, "-h")...)
		name := "kiln " + strings.Join(args, " ")
		if r.code != 0 || !strings.HasPrefix(r.stderr, "Usage: "+name) {
			t.Errorf("%s -h: exit %d, want 0 and a help that starts %q:\n%s", name, r.code, "Usage: "+name, r.stderr)
		}
		for _, line := range strings.Split(r.stderr, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("%s -h names a default twice: %q", name, strings.TrimSpace(line))
			}
		}
	}
}
