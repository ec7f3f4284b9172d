package native

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

func TestMain(m *testing.M) {
	agent.Dispatch()
	os.Exit(m.Run())
}

func newBackend(t testing.TB) *Backend {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes map to their own host uid ranges and cgroups")
	}
	b, err := New(Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func run(t testing.TB, sb *Sandbox, argv ...string) (string, protocol.ExitInfo) {
	t.Helper()
	var out bytes.Buffer
	info, err := sb.Agent.Exec(context.Background(), protocol.Exec{Argv: argv, TimeoutMs: 10000, OutputBytes: 1 << 20}, &out, &out)
	if err != nil {
		t.Fatalf("exec %v: %v", argv, err)
	}
	return out.String(), info
}

func TestCreateExecDestroy(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	sb, err := b.Create(ctx, Spec{Hostname: "box1"})
	if err != nil {
		t.Fatal(err)
	}
	out, info := run(t, sb, "/bin/sh", "-c", "echo $(id -u) $(hostname) $PWD; exit 7")
	if want := "1000 box1 /workspace\n"; out != want || info.Code != 7 {
		t.Errorf("got %q exit %d, want %q exit 7", out, info.Code, want)
	}
	if err := sb.Agent.WriteFile(ctx, "dir/f.txt", []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, sb, "/bin/cat", "dir/f.txt"); out != "hello" {
		t.Errorf("cat = %q, want hello", out)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	orphans, err := b.cg.Orphans()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range orphans {
		if id == sb.ID {
			t.Errorf("cgroup of %s still there after Destroy", sb.ID)
		}
	}
	if _, err := os.Stat("/proc/" + itoa(sb.InitPID)); err == nil {
		t.Errorf("init process %d still exists after Destroy", sb.InitPID)
	}
}

func TestCreateRejectsBadSpec(t *testing.T) {
	b := newBackend(t)
	for _, spec := range []Spec{
		{Hostname: "bad host"},
		{Limits: kiln.Limits{MemoryBytes: 1}},
	} {
		if _, err := b.Create(context.Background(), spec); kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("Create(%+v) = %v, want an invalid error", spec, err)
		}
	}
}

func TestDistinctHostUIDs(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	a, err := b.Create(ctx, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy(ctx)
	c, err := b.Create(ctx, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	if a.HostUID == c.HostUID {
		t.Errorf("two sandboxes share host uid %d", a.HostUID)
	}
	if a.HostUID < 65536 || c.HostUID < 65536 {
		t.Errorf("host uids %d, %d overlap ordinary users", a.HostUID, c.HostUID)
	}
	status, err := os.ReadFile("/proc/" + itoa(a.InitPID) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "Uid:\t"+itoa(int(a.HostUID))) {
		t.Errorf("sandbox PID 1 does not run as host uid %d:\n%s", a.HostUID, status)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// BenchmarkCreateDestroy is the cost of a sandbox with nothing run in it.
func BenchmarkCreateDestroy(b *testing.B) {
	be := newBackend(b)
	ctx := context.Background()
	for b.Loop() {
		sb, err := be.Create(ctx, Spec{})
		if err != nil {
			b.Fatal(err)
		}
		sb.Destroy(ctx)
	}
}

// BenchmarkExecTrue is the cost of one process in a running sandbox.
func BenchmarkExecTrue(b *testing.B) {
	sb := newSandbox(b, Spec{})
	for b.Loop() {
		run(b, sb, "/usr/bin/true")
	}
}

// BenchmarkExecPython is python3 -c 'print(1)' in a running sandbox.
func BenchmarkExecPython(b *testing.B) {
	sb := newSandbox(b, Spec{})
	for b.Loop() {
		run(b, sb, "/usr/bin/python3", "-c", "print(1)")
	}
}

// TestCleanOrphans plays a kiln process that was killed while its sandbox
// ran: the sandbox's live file is unlocked and its cgroup remains. A new
// backend must remove both.
func TestCleanOrphans(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	sb, err := b.Create(ctx, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	// Kill the sandbox but leave its cgroup and live file, as a crash would.
	sb.cmd.Process.Kill()
	sb.cmd.Wait()
	sb.live.Close()
	sb.slot.release()

	if _, err := New(Config{}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	ids, err := b.cg.Orphans()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if id == sb.ID {
			t.Errorf("cgroup of crashed sandbox %s still there", sb.ID)
		}
	}
	if _, err := os.Stat(b.liveDir() + "/" + sb.ID); !os.IsNotExist(err) {
		t.Errorf("live file of crashed sandbox still there: %v", err)
	}
}

func smallDisk() kiln.Limits {
	return kiln.Limits{WorkspaceBytes: 2 * kiln.MiB, TmpBytes: 2 * kiln.MiB}
}

// BenchmarkExecTrueWarm is BenchmarkExecTrue with a pause between runs, as
// between the cells of a session: the spare spawn stage is ready each time.
func BenchmarkExecTrueWarm(b *testing.B) {
	sb := newSandbox(b, Spec{})
	for b.Loop() {
		b.StopTimer()
		time.Sleep(20 * time.Millisecond)
		b.StartTimer()
		run(b, sb, "/usr/bin/true")
	}
}

// TestDefaultSignalDispositions: user programs start with no signal
// ignored or blocked, whatever the agent does with its own signals (an
// ignored disposition would survive exec and, for one, make Ctrl-C
// useless in the user's Python).
func TestDefaultSignalDispositions(t *testing.T) {
	sb := newSandbox(t, Spec{})
	out, _ := run(t, sb, "/bin/grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status")
	if want := "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"; out != want {
		t.Errorf("a user program's signal state:\n%s\nwant:\n%s", out, want)
	}
}

// newSandbox makes a sandbox from a fresh backend, destroyed when the test ends.
func newSandbox(t testing.TB, spec Spec) *Sandbox {
	t.Helper()
	sb, err := newBackend(t).Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}
