package service

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// orderLog records a cell's events as they stream, one token per line of
// stdout ("o:"), stderr ("e:") and per display ("d:" and its text).
type orderLog struct {
	mu     sync.Mutex
	tokens []string
	part   [2]string // an unfinished line of stdout, stderr
}

func (l *orderLog) events() ExecEvents {
	line := func(i int, prefix string) func([]byte) {
		return func(p []byte) {
			l.mu.Lock()
			defer l.mu.Unlock()
			s := l.part[i] + string(p)
			for {
				j := strings.IndexByte(s, '\n')
				if j < 0 {
					break
				}
				l.tokens = append(l.tokens, prefix+s[:j])
				s = s[j+1:]
			}
			l.part[i] = s
		}
	}
	return ExecEvents{Events: engine.Events{
		Stdout: line(0, "o:"),
		Stderr: line(1, "e:"),
		Output: func(o kiln.Output) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.tokens = append(l.tokens, "d:"+engine.Text(o))
		},
	}}
}

// TestPythonOutputOrder: a cell's print, display, print to stderr, a
// child's output (os.system, fd 1 below Python) and os.write(2) reach the
// client in the order the cell wrote them, 50 times over. (Only the order
// of two writes below Python to fds 1 and 2 with nothing between them is
// not kept: they are two pipes.) Before stdout
// went on the kernel's channel with displays, stdout and displays came on
// two paths and their order varied from run to run.
func TestPythonOutputOrder(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, 3*time.Minute)
	u := ts.user(t, "alice", false)
	limits := kiln.DefaultLimits()
	limits.OutputBytes = 16 << 20
	sess, err := ts.CreateSession(ctx, u, SessionSpec{Languages: []string{"python"}, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	code := fmt.Sprintf(`import os, sys
for i in range(%d):
    print("a%%d" %% i, "." * 100_000)  # more than one read of a pipe
    display("x%%d" %% i)
    print("b%%d" %% i, file=sys.stderr)
    os.system("echo c%%d" %% i)
    sys.stdout.write("d%%d\n" %% i)
    os.write(2, b"e%%d\n" %% i)
    print("f%%d" %% i)
`, n)
	var log orderLog
	e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Code: code}, log.events())
	if err != nil {
		t.Fatal(err)
	}
	if e.Result == nil || e.Result.Status != kiln.StatusOK {
		t.Fatalf("cell: %+v", e.Result)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("o:a%d %s", i, strings.Repeat(".", 100_000)), fmt.Sprintf("d:'x%d'", i), fmt.Sprintf("e:b%d", i),
			fmt.Sprintf("o:c%d", i), fmt.Sprintf("o:d%d", i), fmt.Sprintf("e:e%d", i), fmt.Sprintf("o:f%d", i))
	}
	log.mu.Lock()
	got := log.tokens
	log.mu.Unlock()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("events out of order at %d: got %.60q, want %.60q (got %d events, want %d)", i, got[max(0, i-3):min(len(got), i+4)], want[max(0, i-3):min(len(want), i+4)], len(got), len(want))
			}
		}
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	// the result keeps each stream whole as well
	if !strings.HasSuffix(e.Result.Stdout, ".\nc49\nd49\nf49\n") || !strings.HasPrefix(e.Result.Stderr, "b0\ne0\nb1\n") {
		t.Errorf("stdout %.40q stderr %.40q", e.Result.Stdout, e.Result.Stderr)
	}
}

// TestPythonBigPrintCut: a cell that prints without end is stopped at the
// output limit, and what it sent on the kernel's channel is counted and cut
// as pipe output is.
func TestPythonBigPrintCut(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, 3*time.Minute)
	u := ts.user(t, "alice", false)
	limits := kiln.DefaultLimits()
	limits.OutputBytes = 256 << 10
	sess, err := ts.CreateSession(ctx, u, SessionSpec{Languages: []string{"python"}, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{
		"while True:\n    print('x' * 99)",                               // line by line
		"import sys\nwhile True:\n    sys.stdout.write('y' * (4 << 20))", // in big writes, no newline
	} {
		e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Code: code, Timeout: time.Minute}, ExecEvents{})
		if err != nil {
			t.Fatal(err)
		}
		r := e.Result
		if r == nil || r.Status != kiln.StatusOutput {
			t.Fatalf("%q: result %+v, want status output_limit", code, r)
		}
		if n := len(r.Stdout); n == 0 || n > 256<<10 {
			t.Errorf("%q: %d bytes of stdout, want some and at most the 256 KiB limit", code, n)
		}
	}
	// the kernel goes on
	e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Code: "print('after')"}, ExecEvents{})
	if err != nil || e.Result == nil || e.Result.Stdout != "after\n" {
		t.Fatalf("after the cut: %+v %v", e.Result, err)
	}
}
