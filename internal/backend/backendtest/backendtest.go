// Package backendtest is the conformance suite every sandbox backend
// passes (engine.Backend): create, connect, run and files; interrupt and
// kill on timeout; limits reported; destroy and list for reaping. Its
// security half, the attack classes, runs only where the backend claims
// isolation. A backend's own test calls Run.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Run runs the whole suite on b.
func Run(t *testing.T, b engine.Backend) {
	t.Run("CreateConnectRun", func(t *testing.T) { testRun(t, b) })
	t.Run("Files", func(t *testing.T) { testFiles(t, b) })
	t.Run("KillOnTimeout", func(t *testing.T) { testTimeout(t, b) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, b) })
	t.Run("Interrupt", func(t *testing.T) { testInterrupt(t, b) })
	t.Run("LimitsReported", func(t *testing.T) { testLimits(t, b) })
	t.Run("KernelCPUReported", func(t *testing.T) { testKernelCPU(t, b) })
	t.Run("DestroyAndList", func(t *testing.T) { testDestroy(t, b) })
	// The attack classes hold only where the backend claims isolation; a
	// backend that claims none (the test backend) has its own test that
	// every attack succeeds against it, so none passes by accident.
	if !b.Capabilities().Isolation {
		t.Logf("the %s backend claims no isolation: the security half does not apply", b.Capabilities().Name)
		return
	}
	t.Run("Security", func(t *testing.T) {
		for _, a := range Attacks {
			t.Run(a.Name, func(t *testing.T) {
				_, c := Sandbox(t, b, backend.Spec{})
				if err := a.Try(ctxT(t), c); err != nil {
					t.Error(err)
				}
			})
		}
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Sandbox makes a sandbox, connects to it and destroys it when the test ends.
func Sandbox(t *testing.T, b engine.Backend, spec backend.Spec) (backend.Sandbox, *agentclient.Client) {
	t.Helper()
	ctx := ctxT(t)
	sb, err := b.CreateSandbox(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := b.DestroySandbox(context.Background(), sb.ID); err != nil {
			t.Errorf("destroy %s: %v", sb.ID, err)
		}
	})
	c, err := b.Connect(ctx, sb.ID)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return sb, c
}

// sh runs a shell script in the sandbox.
func sh(ctx context.Context, c *agentclient.Client, timeout time.Duration, script string) (string, string, protocol.ExitInfo, error) {
	var out, errb bytes.Buffer
	x, err := c.Exec(ctx, protocol.Exec{Argv: []string{"/bin/sh", "-c", script}, TimeoutMs: timeout.Milliseconds(), OutputBytes: 1 << 20}, &out, &errb)
	return out.String(), errb.String(), x, err
}

func mustSh(t *testing.T, c *agentclient.Client, script string) string {
	t.Helper()
	out, errb, x, err := sh(ctxT(t), c, time.Minute, script)
	if err != nil || x.Code != 0 {
		t.Fatalf("%s: exit %+v, err %v, stderr %q", script, x, err, errb)
	}
	return out
}

func testRun(t *testing.T, b engine.Backend) {
	_, c := Sandbox(t, b, backend.Spec{Env: []string{"KILN_CONFORMANCE=yes"}})
	out, errb, x, err := sh(ctxT(t), c, time.Minute, `echo "out $KILN_CONFORMANCE"; echo err >&2; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	if out != "out yes\n" || errb != "err\n" || x.Code != 3 || x.Signal != "" {
		t.Errorf("got stdout %q, stderr %q, exit %d %q; want \"out yes\\n\", \"err\\n\", 3", out, errb, x.Code, x.Signal)
	}
	// A missing program is the shells' 127, not a broken sandbox.
	var sink bytes.Buffer
	x, err = c.Exec(ctxT(t), protocol.Exec{Argv: []string{"kiln-no-such-program"}, TimeoutMs: 60_000, OutputBytes: 1 << 16}, &sink, &sink)
	if err != nil || x.Code != 127 {
		t.Errorf("missing program: exit %d, err %v, output %q; want 127", x.Code, err, sink.String())
	}
}

func testFiles(t *testing.T, b engine.Backend) {
	_, c := Sandbox(t, b, backend.Spec{})
	ctx := ctxT(t)
	if err := c.Mkdir(ctx, "dir"); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, "dir/in.txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	// User code sees what the agent wrote, and the agent what user code wrote.
	mustSh(t, c, `tr a-z A-Z < dir/in.txt > dir/out.txt`)
	got, err := c.ReadFile(ctx, "dir/out.txt", 1<<10)
	if err != nil || string(got) != "HELLO" {
		t.Fatalf("read out.txt: %q, %v; want HELLO", got, err)
	}
	list, err := c.List(ctx, "dir")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"in.txt", "out.txt"}) {
		t.Errorf("list dir: %v; want in.txt, out.txt", names)
	}
	if err := c.Delete(ctx, "dir", true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "dir"); err == nil {
		t.Error("dir still there after delete")
	}
	// Paths that leave the workspace are refused.
	if _, err := c.ReadFile(ctx, "../../../../etc/passwd", 1<<10); err == nil {
		t.Error("read ../../../../etc/passwd: no error")
	}
}

// pidGone reports whether the process whose pid a script left in file is gone.
func pidGone(t *testing.T, c *agentclient.Client, file string) bool {
	t.Helper()
	out := mustSh(t, c, `if kill -0 "$(cat `+file+`)" 2>/dev/null; then echo alive; else echo gone; fi`)
	return strings.TrimSpace(out) == "gone"
}

func testTimeout(t *testing.T, b engine.Backend) {
	_, c := Sandbox(t, b, backend.Spec{})
	start := time.Now()
	// A child in a session of its own must go too.
	_, _, x, err := sh(ctxT(t), c, time.Second, `setsid sleep 300 & echo $! > bg.pid; sleep 300`)
	if err != nil {
		t.Fatal(err)
	}
	if !x.TimedOut || x.Signal != "SIGKILL" {
		t.Errorf("exit %+v; want timed out, killed", x)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("took %v to stop a 1s timeout", d)
	}
	if !waitFor(func() bool { return pidGone(t, c, "bg.pid") }) {
		t.Error("a background process of the timed-out exec still runs")
	}
}

func waitFor(cond func() bool) bool {
	for range 50 {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func testCancel(t *testing.T, b engine.Backend) {
	_, c := Sandbox(t, b, backend.Spec{})
	ctx, cancel := context.WithCancel(ctxT(t))
	time.AfterFunc(time.Second, cancel)
	_, _, x, err := sh(ctx, c, time.Minute, `sleep 300`)
	if err == nil && !x.Canceled {
		t.Errorf("exit %+v after cancel; want cancelled", x)
	}
	// The sandbox serves the next exec.
	if out := mustSh(t, c, `echo next`); out != "next\n" {
		t.Errorf("after cancel: %q", out)
	}
}

// testInterrupt interrupts a Python cell: the cell ends, the kernel keeps
// its state.
func testInterrupt(t *testing.T, b engine.Backend) {
	if l, err := lang.Lookup("python"); err != nil || l.Available() != nil {
		t.Skip("python3 is not installed")
	}
	e := engine.New(b, nil)
	ctx := ctxT(t)
	s, err := e.NewSession(ctx, engine.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Run(ctx, engine.Cell{Language: "python", Code: "x = 41"}, engine.Events{}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	go func() {
		<-started
		time.Sleep(500 * time.Millisecond)
		s.Interrupt()
	}()
	res, err := s.Run(ctx, engine.Cell{Language: "python", Code: "print('go', flush=True)\nimport time\ntime.sleep(300)"},
		engine.Events{Stdout: func([]byte) {
			select {
			case started <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != kiln.StatusInterrupted {
		t.Errorf("status %q; want interrupted", res.Status)
	}
	res, err = s.Run(ctx, engine.Cell{Language: "python", Code: "print(x + 1)"}, engine.Events{})
	if err != nil || res.Stdout != "42\n" {
		t.Errorf("after interrupt: %q, %v; want 42 (state kept)", res.Stdout, err)
	}
}

func testLimits(t *testing.T, b engine.Backend) {
	_, c := Sandbox(t, b, backend.Spec{})
	// Output: the agent enforces it on every backend.
	var out bytes.Buffer
	x, err := c.Exec(ctxT(t), protocol.Exec{Argv: []string{"/bin/sh", "-c", "yes kiln"}, TimeoutMs: 60_000, OutputBytes: 4096}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !x.OutputTruncated || out.Len() != 4096 || x.OutputBytes != 4096 {
		t.Errorf("output limit: truncated %v, got %d bytes, reported %d; want truncated at 4096", x.OutputTruncated, out.Len(), x.OutputBytes)
	}
	// Usage is reported.
	_, _, x, err = sh(ctxT(t), c, time.Minute, `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`)
	if err != nil {
		t.Fatal(err)
	}
	if x.CPUNs <= 0 || x.WallNs <= 0 || x.PeakMemory <= 0 {
		t.Errorf("usage: cpu %d, wall %d, peak %d; want all positive", x.CPUNs, x.WallNs, x.PeakMemory)
	}
	if !b.Capabilities().Limits {
		return
	}
	_, c = Sandbox(t, b, backend.Spec{Limits: kiln.Limits{MemoryBytes: 64 * kiln.MiB}})
	_, _, x, err = sh(ctxT(t), c, time.Minute, `x=$(head -c 300000000 /dev/zero | tr '\0' a); echo ${#x}`)
	if err != nil {
		t.Fatal(err)
	}
	if !x.OOMKilled {
		t.Errorf("memory limit: exit %+v; want the OOM kill reported", x)
	}
}

// testKernelCPU: a kernel's cell reports the CPU time it used, which the
// service counts against a user's daily CPU budget.
func testKernelCPU(t *testing.T, b engine.Backend) {
	if l, err := lang.Lookup("python"); err != nil || l.Available() != nil {
		t.Skip("python3 is not installed")
	}
	ctx := ctxT(t)
	s, err := engine.New(b, nil).NewSession(ctx, engine.SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	res, err := s.Run(ctx, engine.Cell{Language: "python", Code: "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"}, engine.Events{})
	if err != nil || res.Status != kiln.StatusOK {
		t.Fatalf("cell: %v %+v", err, res)
	}
	if res.Usage.CPU < 400*time.Millisecond {
		t.Errorf("a cell that burned 0.5 s of CPU reports %v", res.Usage.CPU)
	}
}

func testDestroy(t *testing.T, b engine.Backend) {
	ctx := ctxT(t)
	sb, err := b.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Connect(ctx, sb.ID)
	if err != nil {
		b.DestroySandbox(ctx, sb.ID)
		t.Fatal(err)
	}
	ids, err := b.List(ctx)
	if err != nil || !slices.Contains(ids, sb.ID) {
		t.Errorf("list: %v, %v; want it to hold %s", ids, err, sb.ID)
	}
	// Destroy does not wait for a process that outlives its exec.
	mustSh(t, c, `setsid sleep 300 >/dev/null 2>&1 & echo $! > bg.pid`)
	if err := b.DestroySandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.DestroySandbox(ctx, sb.ID); err != nil {
		t.Errorf("second destroy: %v", err)
	}
	if ids, _ := b.List(ctx); slices.Contains(ids, sb.ID) {
		t.Errorf("list after destroy still holds %s", sb.ID)
	}
	if err := c.Ping(ctx); err == nil {
		t.Error("the agent still answers after destroy")
	}
	if _, err := b.Connect(ctx, sb.ID); err == nil {
		t.Error("connect after destroy: no error")
	}
}

// Attack is one class of attack that an isolating backend must stop.
// Try returns nil when the attack failed, as it must.
type Attack struct {
	Name string
	Try  func(ctx context.Context, c *agentclient.Client) error
}

// Attacks are the security half of the suite. A backend without isolation
// fails every one (backend/unboxed's test checks that, so that none of
// them can pass by accident).
var Attacks = []Attack{
	{"ReadHostFile", readHostFile},
	{"SeeHostProcess", seeHostProcess},
	{"ReachHostNetwork", reachHostNetwork},
	{"RunAsRoot", runAsRoot},
}

func run(ctx context.Context, c *agentclient.Client, script string) (string, error) {
	out, errb, x, err := sh(ctx, c, time.Minute, script)
	if err != nil {
		return "", fmt.Errorf("exec: %w", err)
	}
	return out + errb + "exit " + strconv.Itoa(x.Code), nil
}

// readHostFile: a world-readable file in the host's /tmp must not be
// readable, nor visible, from inside.
func readHostFile(ctx context.Context, c *agentclient.Client) error {
	secret := "kiln-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	f, err := os.CreateTemp("/tmp", "kiln-conformance-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	f.WriteString(secret)
	f.Close()
	os.Chmod(f.Name(), 0o644)
	out, err := run(ctx, c, "cat "+f.Name()+" 2>&1")
	if err != nil {
		return err
	}
	if strings.Contains(out, secret) {
		return fmt.Errorf("user code read the host file %s", f.Name())
	}
	return nil
}

// seeHostProcess: a host process must not be visible in /proc.
func seeHostProcess(ctx context.Context, c *agentclient.Client) error {
	mark := fmt.Sprintf("%d.%d", 100000+time.Now().Nanosecond()%100000, os.Getpid())
	cmd := exec.Command("sleep", mark)
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	out, err := run(ctx, c, `cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' '`)
	if err != nil {
		return err
	}
	if strings.Contains(out, mark) {
		return errors.New("user code sees a host process (sleep " + mark + ") in /proc")
	}
	return nil
}

// reachHostNetwork: a listener on the host's loopback must not be reachable.
func reachHostNetwork(ctx context.Context, c *agentclient.Client) error {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if conn, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	if _, err := run(ctx, c, fmt.Sprintf(`bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' 2>&1`, port)); err != nil {
		return err
	}
	select {
	case <-accepted:
		return fmt.Errorf("user code connected to the host's 127.0.0.1:%d", port)
	case <-time.After(500 * time.Millisecond):
		return nil
	}
}

// runAsRoot: user code must not run as host root, nor as the user that
// runs kiln.
func runAsRoot(ctx context.Context, c *agentclient.Client) error {
	out, err := run(ctx, c, `id -u`)
	if err != nil {
		return err
	}
	uid := strings.Fields(out)[0]
	if uid == "0" || uid == strconv.Itoa(os.Getuid()) {
		return fmt.Errorf("user code runs as uid %s, as the host's kiln process does (%d)", uid, os.Getuid())
	}
	return nil
}

// HostDir is a workspace directory on the host for a Spec, reachable by
// a sandbox's unprivileged user.
func HostDir(t *testing.T) string {
	d := filepath.Join(t.TempDir(), "ws")
	os.Chmod(filepath.Dir(d), 0o711)
	os.Chmod(filepath.Dir(filepath.Dir(d)), 0o711)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
