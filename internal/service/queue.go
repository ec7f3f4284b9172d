package service

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// queue bounds the cells and one-shot runs in the service: at most
// running at once and at most length waiting. A full queue refuses at
// once rather than letting a client hang.
type queue struct {
	slots   chan struct{}
	length  int
	mu      sync.Mutex
	waiting int
	running atomic.Int64
}

func newQueue(concurrency, length int) *queue {
	return &queue{slots: make(chan struct{}, concurrency), length: length}
}

// ErrQueueFull is the answer when length requests already wait.
var ErrQueueFull = &kiln.Error{Kind: kiln.Unavailable, Message: "the execution queue is full; retry in a moment"}

// enter takes a place in the line, or fails at once when it is full. The
// place is held until the returned func is called; wait turns it into a
// running slot.
func (q *queue) enter() (*ticket, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.waiting >= q.length {
		return nil, ErrQueueFull
	}
	q.waiting++
	return &ticket{q: q}, nil
}

// ticket is one request's place: waiting, then running, then done.
type ticket struct {
	q       *queue
	running bool
	done    bool
}

// run waits for a running slot; ctx ends the wait.
func (t *ticket) run(ctx context.Context) error {
	select {
	case t.q.slots <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	t.q.mu.Lock()
	t.q.waiting--
	t.q.mu.Unlock()
	t.q.running.Add(1)
	t.running = true
	return nil
}

// release gives the place or the slot back; it may be called twice.
func (t *ticket) release() {
	if t.done {
		return
	}
	t.done = true
	if t.running {
		t.q.running.Add(-1)
		<-t.q.slots
		return
	}
	t.q.mu.Lock()
	t.q.waiting--
	t.q.mu.Unlock()
}

// depth is how many wait.
func (q *queue) depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}
