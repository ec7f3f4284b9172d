//go:build linux

package security

import (
	"context"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// smallProcessesBomb holds more memory than the limit in many processes,
// each smaller than the agent (tail keeps the last 6 MB of its input until
// the input ends). The OOM killer takes the largest process: without
// protection that is the agent, when it shares the memory cgroup (Docker).
const smallProcessesBomb = `for i in $(seq 24); do (head -c 6000000 /dev/zero; sleep 3) | tail -c 6000000 >/dev/null & done; wait; echo done`

// TestAgentKeepsControl: in one sandbox, a memory bomb of many small
// processes, a CPU bomb and a fork bomb each run, and the agent keeps
// serving that sandbox; a timeout and a cancel during each bomb end the
// execution within a second (asserted within controlBound, for a loaded
// CI machine; the figures are logged).
func TestAgentKeepsControl(t *testing.T) {
	s := env(t)
	sb := s.sandbox(t, native.Spec{Limits: kiln.Limits{MemoryBytes: 96 * kiln.MiB, Pids: 128}})
	alive := func(t *testing.T, after string) {
		t.Helper()
		out, _, info := execIn(t, sb, 10*time.Second, "/bin/echo", "still serving")
		if out != "still serving\n" || info.Code != 0 {
			t.Fatalf("after %s the sandbox answered %q, %+v", after, out, info)
		}
		if err := sb.Agent.WriteFile(context.Background(), "after.txt", []byte("ok"), 0); err != nil {
			t.Fatalf("after %s a file operation failed: %v", after, err)
		}
	}
	t.Run("memory bomb of small processes", func(t *testing.T) {
		out, _, info, err := tryExec(sb, 30*time.Second, "/bin/bash", "-c", smallProcessesBomb)
		if err != nil {
			t.Fatalf("the agent lost the execution: %v (%+v)", err, info)
		}
		t.Logf("the bomb printed %q, exit %+v", out, info)
		alive(t, "the memory bomb")
	})
	bombs := []struct{ name, code string }{
		{"cpu", "spin() { while :; do :; done; }; spin & spin & spin & spin"},
		{"memory", smallProcessesBomb},
		// Python's, not the shell's: a shell bomb gives up once forks fail.
		{"fork", "exec python3 -c '" + forkBombPython + "'"},
	}
	for _, b := range bombs {
		t.Run(b.name+" bomb timeout", func(t *testing.T) {
			const timeout = time.Second
			took, info, err := timeExec(sb, context.Background(), timeout, b.code)
			if err != nil {
				t.Fatalf("exec: %v", err)
			}
			t.Logf("timeout %v: the execution ended %v after it started (%+v)", timeout, took, info)
			if !info.TimedOut {
				t.Errorf("want the execution timed out: %+v", info)
			}
			if took > timeout+controlBound {
				t.Errorf("the execution ended %v after it started, with a timeout of %v; want within %v of it", took, timeout, controlBound)
			}
			alive(t, b.name+" bomb")
		})
		t.Run(b.name+" bomb cancel", func(t *testing.T) {
			const after = 500 * time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(after, cancel)
			took, info, err := timeExec(sb, ctx, 30*time.Second, b.code)
			t.Logf("cancel after %v: the execution ended %v after it started (%+v, %v)", after, took, info, err)
			if took > after+controlBound {
				t.Errorf("the execution ended %v after the cancel; want within %v", took-after, controlBound)
			}
			alive(t, b.name+" bomb and a cancel")
		})
	}
}

// controlBound is how long past a timeout or a cancel an execution may
// take to end here: the target is one second; CI's 2-core machine runs
// other suites beside this one.
const controlBound = 3 * time.Second

// timeExec runs bash code in sb with a timeout and returns how long the
// exec took to return.
func timeExec(sb *box, ctx context.Context, timeout time.Duration, code string) (time.Duration, protocol.ExitInfo, error) {
	var stdout, stderr boundedBuffer
	start := time.Now()
	info, err := sb.Agent.Exec(ctx, protocol.Exec{Argv: []string{"/bin/bash", "-c", code}, TimeoutMs: timeout.Milliseconds(), OutputBytes: 1 << 20}, &stdout, &stderr)
	return time.Since(start), info, err
}
