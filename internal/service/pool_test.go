package service

import (
	"sync"
	"testing"
	"time"
)

// fakeSandboxes counts the pool's sandboxes as a host would: made and not
// yet discarded or handed to a session.
type fakeSandboxes struct {
	mu      sync.Mutex
	alive   int
	most    int
	metric  int
	changed chan struct{}
}

func (f *fakeSandboxes) make() (*pooled, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alive++
	f.most = max(f.most, f.alive)
	return &pooled{id: "p"}, nil
}

func (f *fakeSandboxes) discard(*pooled) { f.mu.Lock(); f.alive--; f.mu.Unlock() }

func (f *fakeSandboxes) setReady(n int) {
	f.mu.Lock()
	f.metric = n
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeSandboxes) state() (alive, most, metric int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.alive, f.most, f.metric
}

// settle waits until the metric says want and nothing more happens for a
// while, so that a pool making one sandbox too many has done so.
func (f *fakeSandboxes) settle(t *testing.T, want int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if _, _, m := f.state(); m == want {
			break
		}
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("the pool never reported %d ready", want)
		}
	}
	time.Sleep(200 * time.Millisecond)
}

// TestPoolKeepsExactlyItsSize: --pool 2 means two warm sandboxes on the
// host, the metric says two, and taking one makes exactly one more.
func TestPoolKeepsExactlyItsSize(t *testing.T) {
	f := &fakeSandboxes{changed: make(chan struct{}, 1)}
	p := startPool(2, f.make, f.discard, f.setReady, func(err error) { t.Error(err) })
	f.settle(t, 2)
	if alive, most, metric := f.state(); alive != 2 || most != 2 || metric != 2 {
		t.Fatalf("--pool 2: %d sandboxes alive (at most %d), metric %d; want 2, 2, 2", alive, most, metric)
	}
	if !p.take(func(*pooled) { f.mu.Lock(); f.alive--; f.mu.Unlock() }) {
		t.Fatal("take found no ready sandbox")
	}
	f.settle(t, 2)
	if alive, most, metric := f.state(); alive != 2 || most != 2 || metric != 2 {
		t.Fatalf("after a take: %d sandboxes alive (at most %d), metric %d; want 2, 2, 2", alive, most, metric)
	}
	p.close(nil)
	if alive, _, metric := f.state(); alive != 0 || metric != 0 {
		t.Errorf("after close: %d sandboxes alive, metric %d; want 0, 0", alive, metric)
	}
}
