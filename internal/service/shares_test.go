package service

import (
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestWatcherFallsBehind: a watcher that does not read is dropped once
// it is watchBuffer events behind, and says it lagged; publishing never
// waits for it, and the other watchers of the session keep theirs.
func TestWatcherFallsBehind(t *testing.T) {
	var ws watchers
	slow := &watcher{user: "a", ch: make(chan SessionEvent, watchBuffer)}
	other := &watcher{user: "b", ch: make(chan SessionEvent, 2*watchBuffer)}
	ws.add("s1", slow, 2)
	ws.add("s1", other, 2)
	done := make(chan struct{})
	go func() {
		for range watchBuffer + 1 {
			ws.publish("s1", SessionEvent{Type: SessionStdout, Data: []byte("x")})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("publish waited for a watcher that does not read")
	}
	n := 0
	for range slow.ch {
		n++
	}
	if n != watchBuffer || !slow.lagging() {
		t.Errorf("slow watcher got %d events before its channel closed, lagged %v; want %d, true", n, slow.lagging(), watchBuffer)
	}
	if len(other.ch) != watchBuffer+1 || other.lagging() {
		t.Errorf("the other watcher has %d events, lagged %v; want %d, false", len(other.ch), other.lagging(), watchBuffer+1)
	}
}

// TestWatchersDrop: revoking drops exactly the watchers of that user on
// that session, and a dropped watcher's channel is closed once.
func TestWatchersDrop(t *testing.T) {
	var ws watchers
	a1 := &watcher{user: "a", ch: make(chan SessionEvent, 1)}
	b1 := &watcher{user: "b", ch: make(chan SessionEvent, 1)}
	a2 := &watcher{user: "a", ch: make(chan SessionEvent, 1)}
	ws.add("s1", a1, 2)
	ws.add("s1", b1, 2)
	ws.add("s2", a2, 2)
	if ws.add("s1", &watcher{user: "c", ch: make(chan SessionEvent, 1)}, 2) {
		t.Error("a third watcher of s1 was added past the bound of 2")
	}
	ws.drop("s1", func(w *watcher) bool { return w.user == "a" })
	ws.remove("s1", a1) // again: no double close
	if _, open := <-a1.ch; open {
		t.Error("a's watcher of s1 is still open")
	}
	ws.execution(SessionStarted, kiln.Execution{ID: "e1", SessionID: "s1"})
	ws.execution(SessionStarted, kiln.Execution{ID: "e2", SessionID: "s2"})
	if e := <-b1.ch; e.ExecutionID != "e1" {
		t.Errorf("b's watcher of s1 got %+v, want e1", e)
	}
	if e := <-a2.ch; e.ExecutionID != "e2" {
		t.Errorf("a's watcher of s2 got %+v, want e2", e)
	}
}
