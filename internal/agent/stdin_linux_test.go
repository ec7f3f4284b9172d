package agent

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/protocol"
)

func TestStdinQueue(t *testing.T) {
	stop := make(chan struct{})
	q := newStdinQueue([]byte("first "))
	q.put([]byte("second"), false)
	if p, eof, lost, ok := q.take(4, stop); string(p) != "firs" || eof || lost || !ok {
		t.Errorf("take(4) = %q, eof %v, lost %v, ok %v; want \"firs\"", p, eof, lost, ok)
	}
	if p, _, _, _ := q.take(100, stop); string(p) != "t second" {
		t.Errorf("take(100) = %q, want the rest, in order", p)
	}

	// An empty queue waits for input, or for stop.
	got := make(chan string)
	go func() {
		p, _, _, _ := q.take(100, stop)
		got <- string(p)
	}()
	select {
	case p := <-got:
		t.Fatalf("take returned %q from an empty queue", p)
	case <-time.After(50 * time.Millisecond):
	}
	q.put([]byte("late"), false)
	if p := <-got; p != "late" {
		t.Errorf("take after put = %q, want late", p)
	}
	close(stop)
	if _, _, _, ok := q.take(100, stop); ok {
		t.Error("take on a stopped wait said ok")
	}

	// EOF comes after the data; input after EOF is dropped.
	q = newStdinQueue(nil)
	q.put([]byte("end"), true)
	q.put([]byte("after"), false)
	live := make(chan struct{})
	if p, eof, _, _ := q.take(100, live); string(p) != "end" || eof {
		t.Errorf("take = %q eof %v; want the data before EOF", p, eof)
	}
	if p, eof, lost, _ := q.take(100, live); len(p) != 0 || !eof || lost {
		t.Errorf("take = %q eof %v lost %v; want EOF", p, eof, lost)
	}

	// Past the bound input is dropped, what fit is kept, and the end says lost.
	q = newStdinQueue(nil)
	chunk := bytes.Repeat([]byte("x"), protocol.MaxPendingStdin/4)
	for range 5 {
		q.put(chunk, false)
	}
	n := 0
	for {
		p, eof, lost, _ := q.take(1<<20, live)
		n += len(p)
		if eof {
			if !lost {
				t.Error("an overflowed queue ended without saying input was lost")
			}
			break
		}
	}
	if n != protocol.MaxPendingStdin {
		t.Errorf("an overflowed queue gave %d bytes, want the %d that fit", n, protocol.MaxPendingStdin)
	}
	if !strings.Contains(stdinLost, "16 MiB") {
		t.Errorf("stdinLost = %q, want it to name the bound", stdinLost)
	}
}
