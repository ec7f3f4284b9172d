package service

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestQueueRefusesWhenFullAndFreesPlaces(t *testing.T) {
	q := newQueue(1, 2)
	a, err := q.enter()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, _ := q.enter()
	c, _ := q.enter()
	if _, err := q.enter(); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third waiter: err = %v, want ErrQueueFull", err)
	}
	if got := q.depth(); got != 2 {
		t.Errorf("depth = %d, want 2", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.run(ctx); err == nil {
		t.Fatal("b ran while a held the only slot")
	}
	b.release()
	a.release()
	if err := c.run(context.Background()); err != nil {
		t.Fatalf("c after a released: %v", err)
	}
	c.release()
	c.release() // twice is harmless
	if q.depth() != 0 || q.running.Load() != 0 || len(q.slots) != 0 {
		t.Errorf("after all released: depth %d running %d slots %d", q.depth(), q.running.Load(), len(q.slots))
	}
}
