package native

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// tinyKernel is the smallest kernel that speaks kernelproto: enough to test
// the agent's side of cells (attribution, limits, interrupts, artifacts)
// without the real kernels.
const tinyKernel = `
import json, os, signal, socket, sys
ch = socket.socket(fileno=3)
def send(m): ch.sendall((json.dumps(m) + "\n").encode())
send({"type": "ready", "language": "tiny", "version": "1"})
ns = {}
for line in ch.makefile("rb"):
    m = json.loads(line)
    if m["type"] != "execute":
        send({"type": "check_result", "cell": m["cell"], "status": "complete"})
        continue
    status = "ok"
    try:
        exec(m["code"], ns)
    except KeyboardInterrupt:
        status = "interrupted"
    except BaseException as e:
        send({"type": "error", "cell": m["cell"], "name": type(e).__name__, "message": str(e), "traceback": []})
        status = "error"
    sys.stdout.flush(); sys.stderr.flush()
    send({"type": "done", "cell": m["cell"], "status": status})
`

type cellOut struct {
	done   protocol.CellDone
	stdout string
	stderr string
	errs   []kernelproto.Error
}

func cell(t testing.TB, sb *Sandbox, code string, timeout time.Duration) cellOut {
	t.Helper()
	var out cellOut
	var so, se strings.Builder
	req := protocol.Cell{
		Kernel:      protocol.Kernel{Language: "tiny", Argv: []string{"/usr/bin/python3", "-u", "-c", tinyKernel}},
		Code:        code,
		TimeoutMs:   timeout.Milliseconds(),
		OutputBytes: 1 << 20,
	}
	done, err := sb.Agent.Cell(context.Background(), req, agentclient.CellEvents{
		Stdout: func(p []byte) { so.Write(p) },
		Stderr: func(p []byte) { se.Write(p) },
		Error:  func(e kernelproto.Error) { out.errs = append(out.errs, e) },
	})
	if err != nil {
		t.Fatalf("cell %q: %v", code, err)
	}
	out.done, out.stdout, out.stderr = done, so.String(), se.String()
	return out
}

func TestCellsKeepStateAndAttributeOutput(t *testing.T) {
	sb := newSandbox(t, Spec{})
	ctx := context.Background()

	first := cell(t, sb, "x = 41\nprint('a' * 200000)\nimport sys; print('err', file=sys.stderr)", 10*time.Second)
	if first.done.Status != "ok" || first.stdout != strings.Repeat("a", 200000)+"\n" || first.stderr != "err\n" {
		t.Fatalf("first cell: %+v, %d bytes of stdout, stderr %q", first.done, len(first.stdout), first.stderr)
	}
	if len(first.done.Kernel) == 0 {
		t.Error("the cell that started the kernel did not carry its ready message")
	}
	second := cell(t, sb, "print(x + 1)", 10*time.Second)
	if second.stdout != "42\n" || len(second.done.Kernel) != 0 {
		t.Errorf("second cell = %q (kernel %s), want 42 from the same kernel", second.stdout, second.done.Kernel)
	}
	errCell := cell(t, sb, "1/0", 10*time.Second)
	if errCell.done.Status != "error" || len(errCell.errs) != 1 || errCell.errs[0].Name != "ZeroDivisionError" {
		t.Errorf("error cell = %+v %+v", errCell.done, errCell.errs)
	}
	art := cell(t, sb, "open('out.txt', 'w').write('hi')\nimport os; os.makedirs('.kiln', exist_ok=True); open('.kiln/cache', 'w').write('x')", 10*time.Second)
	if len(art.done.Artifacts) != 1 || art.done.Artifacts[0] != (protocol.Artifact{Path: "out.txt", Size: 2, Change: "created"}) {
		t.Errorf("artifacts = %+v, want out.txt created (and nothing under .kiln)", art.done.Artifacts)
	}
	mod := cell(t, sb, "open('out.txt', 'a').write('!!')\nimport os; os.remove('.kiln/cache')", 10*time.Second)
	if len(mod.done.Artifacts) != 1 || mod.done.Artifacts[0].Change != "modified" || mod.done.Artifacts[0].Size != 4 {
		t.Errorf("artifacts = %+v, want out.txt modified to 4 bytes", mod.done.Artifacts)
	}
	if err := sb.Agent.Restart(ctx, ""); err != nil {
		t.Fatal(err)
	}
	after := cell(t, sb, "print('x' in dir())", 10*time.Second)
	if after.stdout != "False\n" || len(after.done.Kernel) == 0 {
		t.Errorf("after restart: %q, want a fresh kernel without x", after.stdout)
	}
	if out, _ := run(t, sb, "/bin/cat", "out.txt"); out != "hi!!" {
		t.Errorf("restart lost workspace files: %q", out)
	}
}

func TestCellLimits(t *testing.T) {
	sb := newSandbox(t, Spec{Limits: kiln.Limits{MemoryBytes: 128 * kiln.MiB}})
	cell(t, sb, "kept = 'yes'", 10*time.Second)

	start := time.Now()
	to := cell(t, sb, "while True: pass", 500*time.Millisecond)
	if to.done.Status != "timeout" || to.done.KernelLost || time.Since(start) > 3*time.Second {
		t.Errorf("timeout: %+v after %v; want timeout with the kernel kept", to.done, time.Since(start))
	}
	if c := cell(t, sb, "print(kept)", 10*time.Second); c.stdout != "yes\n" {
		t.Errorf("state after an interrupted timeout: %q", c.stdout)
	}

	start = time.Now()
	stubborn := cell(t, sb, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", 500*time.Millisecond)
	if stubborn.done.Status != "timeout" || !stubborn.done.KernelLost || time.Since(start) > 5*time.Second {
		t.Errorf("a kernel ignoring SIGINT: %+v after %v; want timeout and the kernel lost", stubborn.done, time.Since(start))
	}

	flood := cell(t, sb, "while True: print('x' * 1000)", 10*time.Second)
	if flood.done.Status != "output_limit" || len(flood.stdout) > 1<<20 {
		t.Errorf("flood: %+v with %d bytes", flood.done, len(flood.stdout))
	}

	oom := cell(t, sb, "b = bytearray(400 << 20)", 10*time.Second)
	if oom.done.Status != "memory_limit" || !oom.done.KernelLost {
		t.Errorf("memory bomb: %+v", oom.done)
	}
	if c := cell(t, sb, "print('alive')", 10*time.Second); c.stdout != "alive\n" {
		t.Errorf("after the memory bomb: %q", c.stdout)
	}

	exit := cell(t, sb, "import os; os._exit(3)", 10*time.Second)
	if exit.done.Status != "error" || !exit.done.KernelLost || !strings.Contains(exit.done.Reason, "status 3") {
		t.Errorf("kernel exit: %+v", exit.done)
	}
}

func TestCellInterrupt(t *testing.T) {
	sb := newSandbox(t, Spec{})
	cell(t, sb, "n = 7", 10*time.Second)
	go func() {
		time.Sleep(300 * time.Millisecond)
		sb.Agent.InterruptCells()
	}()
	start := time.Now()
	c := cell(t, sb, "import time\ntime.sleep(100)", 30*time.Second)
	if c.done.Status != "interrupted" || c.done.KernelLost || time.Since(start) > 2*time.Second {
		t.Errorf("interrupt: %+v after %v", c.done, time.Since(start))
	}
	if c := cell(t, sb, "print(n)", 10*time.Second); c.stdout != "7\n" {
		t.Errorf("state after interrupt: %q", c.stdout)
	}
}

// BenchmarkCellWarm is a trivial cell in a running kernel, through the
// agent: the path that the warm-cell target is about.
func BenchmarkCellWarm(b *testing.B) {
	sb := newSandbox(b, Spec{})
	ctx := context.Background()
	req := protocol.Cell{
		Kernel:      protocol.Kernel{Language: "tiny", Argv: []string{"/usr/bin/python3", "-u", "-c", tinyKernel}},
		Code:        "1+1",
		TimeoutMs:   10000,
		OutputBytes: 1 << 20,
	}
	if _, err := sb.Agent.Cell(ctx, req, agentclient.CellEvents{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := sb.Agent.Cell(ctx, req, agentclient.CellEvents{}); err != nil {
			b.Fatal(err)
		}
	}
}
