//go:build linux

package security

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// attackSession runs cells in a fresh session, as the service would, then
// checks that the host is unchanged, the service healthy and nothing of
// the session left over.
func attackSession(t *testing.T, lim kiln.Limits, cells func(*engine.Session)) {
	t.Helper()
	s := env(t)
	func() {
		s.sandboxes.RLock()
		defer s.sandboxes.RUnlock()
		sess, err := s.engine.NewSession(context.Background(), engine.SessionSpec{Limits: lim})
		if err != nil {
			t.Fatalf("new session: %v", err)
		}
		defer sess.Close(context.Background())
		cells(sess)
	}()
	s.checkHost(t, "session attack")
}

// cellOutput counts every byte a cell's events carried to the host.
type cellOutput struct{ n int64 }

func (c *cellOutput) events() engine.Events {
	return engine.Events{
		Stdout: func(p []byte) { c.n += int64(len(p)) },
		Stderr: func(p []byte) { c.n += int64(len(p)) },
		Output: func(o kiln.Output) {
			for k, v := range o.Data {
				c.n += int64(len(k) + len(v))
			}
		},
	}
}

func resultSize(r kiln.CellResult) int64 {
	n := int64(len(r.Stdout) + len(r.Stderr))
	for _, o := range r.Outputs {
		for k, v := range o.Data {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// TestDisplayFlood: rich displays count against the output limit. 100
// displays of 1 MiB with a 64 KiB limit stop the cell (output_limit, with
// a notice); the host is handed and keeps no more than the limit.
func TestDisplayFlood(t *testing.T) {
	const limit = 64 * kiln.KiB
	attackSession(t, kiln.Limits{OutputBytes: limit}, func(sess *engine.Session) {
		for _, tc := range []struct{ language, code string }{
			{"python", "for i in range(100):\n    display({'text/plain': 'x' * (1 << 20)}, raw=True)"},
			{"python", "import os, json\nline = (json.dumps({'type': 'display', 'cell': 'c', 'data': {'text/plain': 'y' * (1 << 20)}}) + '\\n').encode()\nfor i in range(100):\n    os.write(3, line)"},
			{"javascript", "for (let i = 0; i < 100; i++) display.text('x'.repeat(1 << 20))"},
		} {
			var seen cellOutput
			r, err := sess.Run(context.Background(), engine.Cell{Language: tc.language, Code: tc.code, Timeout: 30 * time.Second}, seen.events())
			if err != nil {
				t.Fatalf("%s display flood: %v", tc.language, err)
			}
			if r.Status != kiln.StatusOutput || !strings.Contains(r.Notice, "output limit") {
				t.Errorf("%s display flood: status %s, notice %q; want output_limit with a notice", tc.language, r.Status, r.Notice)
			}
			if got := resultSize(r); got > limit || seen.n > limit {
				t.Errorf("%s display flood: the host kept %d bytes and was handed %d; the limit is %d", tc.language, got, seen.n, limit)
			}
		}
	})
}

// TestChannelFlood: user code that writes to its kernel's channel (fd 3)
// as fast as it can, and ignores the interrupt, cannot starve the agent:
// the agent drops what does not fit, stops the cell, kills the kernel,
// and keeps serving the same sandbox (a file written before is still
// there; a replaced sandbox would have a new, empty workspace).
func TestChannelFlood(t *testing.T) {
	const prelude = "import os, signal, json\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
	floods := []struct{ name, code string }{
		{"lines of 30 MiB", prelude + "line = (json.dumps({'type': 'display', 'cell': 'c', 'data': {'text/plain': 'x' * (30 << 20)}}) + '\\n').encode()\nwhile True:\n    os.write(3, line)"},
		{"one endless line", prelude + "chunk = b'x' * (4 << 20)\nwhile True:\n    os.write(3, chunk)"},
		{"displays just under a frame", prelude + "line = (json.dumps({'type': 'display', 'cell': 'c', 'data': {'text/plain': 'x' * (4000 << 10)}}) + '\\n').encode()\nwhile True:\n    os.write(3, line)"},
	}
	attackSession(t, kiln.Limits{OutputBytes: 32 * kiln.MiB, MemoryBytes: 1024 * kiln.MiB}, func(sess *engine.Session) {
		if err := sess.Agent().WriteFile(context.Background(), "before.txt", []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, f := range floods {
			r, err := sess.Run(context.Background(), engine.Cell{Language: "python", Code: f.code, Timeout: 20 * time.Second}, engine.Events{})
			if err != nil {
				t.Fatalf("%s: the cell could not run: %v", f.name, err)
			}
			if r.Status == kiln.StatusOK || r.Notice == "" {
				t.Errorf("%s: status %s, notice %q; want the cell stopped and named", f.name, r.Status, r.Notice)
			}
			data, err := sess.Agent().ReadFile(context.Background(), "before.txt", 64)
			if err != nil || string(data) != "kept" {
				t.Fatalf("%s: the sandbox did not survive (before.txt: %q, %v)", f.name, data, err)
			}
			if r, err := sess.Run(context.Background(), engine.Cell{Language: "python", Code: "print('alive')"}, engine.Events{}); err != nil || r.Stdout != "alive\n" {
				t.Fatalf("%s: the next cell: %v %+v", f.name, err, r)
			}
		}
	})
}

// TestDetachedProcessesEndWithTheCell: a session's program cell that
// starts processes outside its process group and session (setsid, a
// double fork) takes them with it when its time limit or a cancel stops
// it; the session's Python kernel keeps its state.
func TestDetachedProcessesEndWithTheCell(t *testing.T) {
	marker := fmt.Sprint(800000 + time.Now().UnixNano()%99999)
	code := `#include <stdlib.h>
#include <unistd.h>
int main(void) {
	system("setsid sh -c 'sleep ` + marker + `' &");
	if (fork() == 0) {
		if (fork() == 0) {
			setsid();
			execlp("sleep", "sleep", "` + marker + `.5", (char *)0);
		}
		_exit(0);
	}
	for (;;) pause();
}`
	attackSession(t, kiln.Limits{}, func(sess *engine.Session) {
		if r, err := sess.Run(context.Background(), engine.Cell{Language: "python", Code: "v = 42"}, engine.Events{}); err != nil || r.Status != kiln.StatusOK {
			t.Fatalf("python: %v %+v", err, r)
		}
		for _, stop := range []struct {
			name      string
			timeout   time.Duration
			interrupt bool
		}{{"timeout", 3 * time.Second, false}, {"cancel", time.Minute, true}} {
			seen := make(chan int, 1) // how many of them the host saw before the interrupt
			if stop.interrupt {
				go func() {
					n := 0
					for deadline := time.Now().Add(30 * time.Second); n < 2 && time.Now().Before(deadline); n = len(detached(marker)) {
						time.Sleep(50 * time.Millisecond)
					}
					seen <- n
					sess.Interrupt()
				}()
			}
			r, err := sess.Run(context.Background(), engine.Cell{Language: "c", Code: code, Timeout: stop.timeout}, engine.Events{})
			if err != nil || r.Status == kiln.StatusOK {
				t.Fatalf("%s: the C cell: %v %+v", stop.name, err, r)
			}
			if stop.interrupt {
				if n := <-seen; n < 2 {
					t.Fatalf("%s: the host saw %d of the cell's 2 detached sleeps while it ran: the check below would prove nothing", stop.name, n)
				}
			}
			deadline := time.Now().Add(2 * time.Second)
			for left := detached(marker); len(left) > 0; left = detached(marker) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: processes the cell started outlived it: %v", stop.name, left)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		if r, err := sess.Run(context.Background(), engine.Cell{Language: "python", Code: "v"}, engine.Events{}); err != nil || len(r.Outputs) == 0 || !strings.Contains(string(r.Outputs[0].Data["text/plain"]), "42") {
			t.Errorf("the Python kernel lost its state: %v %+v", err, r)
		}
	})
}

// detached lists the live host processes of a sandbox uid, native's
// range or a container's (Docker, a Pod), whose command line is sleep
// with marker.
func detached(marker string) []string {
	procs, _ := sandboxProcs(0, 0)
	inContainers, _ := sandboxProcs(docker.UID, docker.UID+1)
	procs = append(procs, inContainers...)
	var out []string
	for _, p := range procs {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
		if strings.Contains(string(cmd), marker) && !strings.Contains(string(stat), ") Z") {
			out = append(out, p.String())
		}
	}
	return out
}
