package engine

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestDisplaysCountAgainstOutputLimit: rich displays count against the
// cell's output limit as stdout does. 100 displays of 1 MiB in a session
// with a 64 KiB limit stop the cell with status output_limit and a notice,
// and the result holds no more than the limit.
func TestDisplaysCountAgainstOutputLimit(t *testing.T) {
	const limit = 64 * kiln.KiB
	s := newSession(t, kiln.Limits{OutputBytes: limit})
	for _, tc := range []struct{ language, code string }{
		{"python", "for i in range(100):\n    display({'text/plain': 'x' * (1 << 20)}, raw=True)"},
		{"python", "import time\nfor i in range(1000):\n    display({'text/plain': 'y' * 10000}, raw=True)\ntime.sleep(30)"},
		{"javascript", "for (let i = 0; i < 100; i++) display.text('x'.repeat(1 << 20))"},
	} {
		var seen int64
		ev := Events{Output: func(o kiln.Output) { seen += outputSize(o) }}
		start := time.Now()
		res, err := s.Run(context.Background(), Cell{Language: tc.language, Code: tc.code, Timeout: 60 * time.Second}, ev)
		if err != nil {
			t.Fatalf("%s: %v", tc.language, err)
		}
		var kept int64
		for _, o := range res.Outputs {
			kept += outputSize(o)
		}
		kept += int64(len(res.Stdout) + len(res.Stderr))
		if res.Status != kiln.StatusOutput || res.Notice == "" {
			t.Errorf("%s displays past the limit: status %s, notice %q; want output_limit and a notice", tc.language, res.Status, res.Notice)
		}
		if kept > limit || seen > limit {
			t.Errorf("%s: the result holds %d bytes and the events carried %d; the limit is %d", tc.language, kept, seen, limit)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("%s: the cell ran %v; it should stop when it passes the limit", tc.language, took)
		}
	}
	if r := runCell(t, s, "python", "print('still here')"); r.Stdout != "still here\n" {
		t.Errorf("the next cell: %+v", r)
	}
}

// TestOutputBudget: the host keeps at most the limit, whatever it is sent.
func TestOutputBudget(t *testing.T) {
	b := outputBudget{left: 10}
	if got := string(b.clip([]byte("12345678"))); got != "12345678" {
		t.Errorf("clip under the limit: %q", got)
	}
	if got := string(b.clip([]byte("abcdef"))); got != "ab" {
		t.Errorf("clip at the limit: %q, want %q", got, "ab")
	}
	if b.take(1) || len(b.clip([]byte("x"))) != 0 {
		t.Error("the budget took more after it was spent")
	}
}

func outputSize(o kiln.Output) int64 {
	return displaySize(kernelproto.Display{Data: o.Data, Metadata: o.Metadata})
}

// TestLimitsAreNamed: a limit that stops a cell is named in the result,
// status and notice, whatever the language; a kernel that kept its state
// says so, and one the limit cost its state says that.
func TestLimitsAreNamed(t *testing.T) {
	s := newSession(t, kiln.Limits{MemoryBytes: 128 * kiln.MiB, OutputBytes: 16 * kiln.KiB})
	cases := []struct {
		language, code string
		status         kiln.CellStatus
		notice         string
	}{
		{"python", "while True: pass", kiln.StatusTimeout, "time limit reached: the cell ran longer than 1s"},
		{"javascript", "for (;;) {}", kiln.StatusTimeout, "time limit reached: the cell ran longer than 1s"},
		{"javascript", "await new Promise(() => {})", kiln.StatusTimeout, "time limit reached"},
		{"bash", "while :; do :; done", kiln.StatusTimeout, "time limit reached"},
		{"c", "int main(void) { for (;;) {} }", kiln.StatusTimeout, "time limit reached: the cell ran longer than 1s"},
		{"python", "while True: print('x' * 1000)", kiln.StatusOutput, "output limit reached: the cell wrote more than 16 KiB"},
		{"javascript", "for (;;) console.log('x'.repeat(1000))", kiln.StatusOutput, "output limit reached"},
		{"bash", "yes", kiln.StatusOutput, "output limit reached"},
		{"c", "#include <stdio.h>\nint main(void) { for (;;) puts(\"xxxxxxxx\"); }", kiln.StatusOutput, "output limit reached"},
	}
	for _, tc := range cases {
		res, err := s.Run(context.Background(), Cell{Language: tc.language, Code: tc.code, Timeout: time.Second}, Events{})
		if err != nil {
			t.Fatalf("%s %q: %v", tc.language, tc.code, err)
		}
		if res.Status != tc.status || !strings.HasPrefix(res.Notice, tc.notice) {
			t.Errorf("%s %q: status %s, notice %q; want %s and a notice that starts %q", tc.language, tc.code, res.Status, res.Notice, tc.status, tc.notice)
		}
	}
}

// TestMemoryKillSaysStateLost: after a memory kill the result says that
// the kernel was restarted and its state lost, and it is.
func TestMemoryKillSaysStateLost(t *testing.T) {
	s := newSession(t, kiln.Limits{MemoryBytes: 128 * kiln.MiB})
	runCell(t, s, "python", "kept = 1")
	r := runCell(t, s, "python", "b = bytearray(300 << 20)")
	if r.Status != kiln.StatusMemory || !strings.Contains(r.Notice, "memory limit reached") ||
		!strings.Contains(r.Notice, "restarted") || !strings.Contains(r.Notice, "state") || !strings.Contains(r.Notice, "lost") {
		t.Errorf("memory kill: status %s, notice %q; want memory_limit and a notice that the kernel was restarted and its state lost", r.Status, r.Notice)
	}
	if r := runCell(t, s, "python", "'kept' in globals()"); result(r) != "False" {
		t.Errorf("the state after a memory kill: %+v", r)
	}
}

// TestDetachedProgramProcessesDie: a session's program cell that starts
// processes which leave its process group and session (setsid, a double
// fork) takes them with it when its time limit stops it, and the session's
// Python kernel keeps its state.
func TestDetachedProgramProcessesDie(t *testing.T) {
	s := newSession(t, kiln.Limits{})
	runCell(t, s, "python", "v = 42")
	marker := strconv.Itoa(900000 + int(time.Now().UnixNano()%99999))
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
	res, err := s.Run(context.Background(), Cell{Language: "c", Code: code, Timeout: 2 * time.Second}, Events{})
	if err != nil || res.Status != kiln.StatusTimeout {
		t.Fatalf("C cell: %v %+v", err, res)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := sleepers(marker)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the cell's timeout these processes it started still run: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := runCell(t, s, "python", "v"); result(r) != "42" {
		t.Errorf("the Python kernel lost its state: %+v", r)
	}
}

// sleepers lists the host's live processes whose command line holds
// "sleep" and marker.
func sleepers(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil || bytes.Contains(stat, []byte(") Z")) {
			continue
		}
		c := strings.ReplaceAll(string(cmd), "\x00", " ")
		if strings.Contains(c, "sleep") && strings.Contains(c, marker) {
			out = append(out, e.Name()+": "+c)
		}
	}
	return out
}
