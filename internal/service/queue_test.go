package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// runNow runs t and fails the test if it had to wait.
func runNow(t *testing.T, what string, tk *ticket) {
	t.Helper()
	var waited *Place
	if err := tk.run(context.Background(), func(p Place) { waited = &p }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if waited != nil {
		t.Fatalf("%s waited (place %+v), want it admitted at once", what, *waited)
	}
}

// waiter is a ticket waiting in the background.
type waiter struct {
	tk    *ticket
	place Place
	ran   chan error
}

// startWaiting enters user's ticket and runs it on a goroutine; it
// returns once the ticket is in line, with its place.
func startWaiting(t *testing.T, q *queue, user string) *waiter {
	t.Helper()
	tk, err := q.enter(user)
	if err != nil {
		t.Fatal(err)
	}
	w := &waiter{tk: tk, ran: make(chan error, 1)}
	placed := make(chan Place, 1)
	go func() { w.ran <- tk.run(context.Background(), func(p Place) { placed <- p }) }()
	select {
	case w.place = <-placed:
	case err := <-w.ran:
		t.Fatalf("%s's ticket ran at once (err %v), want it to wait", user, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the ticket neither ran nor waited")
	}
	return w
}

// admitted says whether the ticket holds a slot. Release hands slots
// over synchronously, so this needs no waiting.
func (w *waiter) admitted() bool {
	w.tk.q.mu.Lock()
	defer w.tk.q.mu.Unlock()
	return w.tk.state == running
}

func (w *waiter) stillWaiting() bool { return !w.admitted() }

func mustEnter(t *testing.T, q *queue, user string) *ticket {
	t.Helper()
	tk, err := q.enter(user)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestQueueRefusesWhenFullAndFreesPlaces(t *testing.T) {
	q := newQueue(1, 1, 2, 2)
	a := mustEnter(t, q, "u")
	runNow(t, "a", a)
	b := mustEnter(t, q, "u")
	c := mustEnter(t, q, "v")
	if _, err := q.enter("w"); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third waiter: err = %v, want ErrQueueFull", err)
	}
	if got := q.depth(); got != 2 {
		t.Errorf("depth = %d, want 2", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.run(ctx, nil); err == nil {
		t.Fatal("b ran while a held the only slot")
	}
	b.release()
	a.release()
	runNow(t, "c after a released", c)
	c.release()
	c.release() // twice is harmless
	if q.depth() != 0 || q.busy() != 0 || len(q.users) != 0 || len(q.ring) != 0 {
		t.Errorf("after all released: depth %d running %d users %d ring %v", q.depth(), q.busy(), len(q.users), q.ring)
	}
}

// TestQueueOneUsersLongCellsLeaveRoom: a user with many long cells holds
// at most its own cap; another user's cell starts at once, and the first
// user's extra cells wait with reason "user".
func TestQueueOneUsersLongCellsLeaveRoom(t *testing.T) {
	q := newQueue(4, 2, 64, 16)
	for i := range 2 {
		runNow(t, fmt.Sprintf("alice's cell %d", i), mustEnter(t, q, "alice"))
	}
	var extra []*waiter
	for range 5 {
		extra = append(extra, startWaiting(t, q, "alice"))
	}
	if p := extra[0].place; p.Reason != WaitUser || p.Position != 1 {
		t.Errorf("alice's third cell: place %+v, want position 1, reason user", p)
	}
	runNow(t, "bob's print(1) while alice has 2 running and 5 waiting", mustEnter(t, q, "bob"))
	runNow(t, "carol's cell", mustEnter(t, q, "carol"))
	if q.busy() != 4 {
		t.Errorf("running = %d, want 4", q.busy())
	}
}

// TestQueueFreedSlotGoesToTheUserWithLeast: with every slot taken by one
// user who also has a long line, another user's cell is first in line
// and takes the next freed slot.
func TestQueueFreedSlotGoesToTheUserWithLeast(t *testing.T) {
	q := newQueue(2, 2, 64, 32)
	a1, a2 := mustEnter(t, q, "alice"), mustEnter(t, q, "alice")
	runNow(t, "a1", a1)
	runNow(t, "a2", a2)
	var alice []*waiter
	for range 10 {
		alice = append(alice, startWaiting(t, q, "alice"))
	}
	bob := startWaiting(t, q, "bob")
	if bob.place.Position != 1 || bob.place.Reason != WaitServer {
		t.Errorf("bob's place = %+v, want position 1 (alice's line does not count), reason server", bob.place)
	}
	a1.release()
	if !bob.admitted() {
		t.Fatal("bob was not admitted at the first release")
	}
	for i, w := range alice {
		if !w.stillWaiting() {
			t.Fatalf("alice's waiting cell %d ran before bob's", i)
		}
	}
	a2.release()
	if !alice[0].admitted() {
		t.Fatal("alice's first waiting cell was not admitted at the second release")
	}
	if !alice[1].stillWaiting() {
		t.Fatal("alice's cells jumped their own order")
	}
}

// TestQueueRoundRobinBound: with every slot taken, a cell starts within
// one admission per other waiting user, however long their lines are:
// u3's one cell, behind u1's and u2's six each, is admitted by the third
// freed slot, before either of them gets a second.
func TestQueueRoundRobinBound(t *testing.T) {
	q := newQueue(3, 3, 64, 16)
	var held []*ticket
	for i := range 3 {
		tk := mustEnter(t, q, "x")
		runNow(t, fmt.Sprintf("x's cell %d", i), tk)
		held = append(held, tk)
	}
	lines := map[string][]*waiter{}
	for _, u := range []string{"u1", "u2"} {
		for range 6 {
			lines[u] = append(lines[u], startWaiting(t, q, u))
		}
	}
	late := startWaiting(t, q, "u3")
	if late.place.Position != 3 || late.place.Reason != WaitServer {
		t.Errorf("u3's place = %+v, want position 3 (one per waiting user), reason server", late.place)
	}
	for i, tk := range held {
		tk.release()
		if !late.stillWaiting() {
			t.Logf("u3 admitted at release %d", i+1)
			break
		}
		if i == 2 {
			t.Fatal("u3 was not admitted within three freed slots")
		}
	}
	for u, line := range lines {
		if !line[1].stillWaiting() {
			t.Errorf("%s's second cell ran before u3's first", u)
		}
	}
}

// TestQueueCancelLeavesNoTrace: a wait that ends by its context gives its
// place back and never takes a slot.
func TestQueueCancelLeavesNoTrace(t *testing.T) {
	q := newQueue(1, 1, 8, 8)
	a := mustEnter(t, q, "a")
	runNow(t, "a", a)
	b := mustEnter(t, q, "b")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.run(ctx, nil) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled wait reported a slot")
	}
	b.release()
	c := startWaiting(t, q, "c")
	if c.place.Position != 1 {
		t.Errorf("after a cancelled wait, the next waiter's place = %+v, want 1", c.place)
	}
	a.release()
	if !c.admitted() {
		t.Fatal("c was not admitted when a released")
	}
	c.tk.release()
	if q.depth() != 0 || q.busy() != 0 || len(q.users) != 0 {
		t.Errorf("after all released: depth %d running %d users %v", q.depth(), q.busy(), q.users)
	}
}

// TestQueueUserShareOfTheLine: one user cannot take every waiting place.
func TestQueueUserShareOfTheLine(t *testing.T) {
	q := newQueue(1, 1, 8, 2)
	runNow(t, "a", mustEnter(t, q, "alice"))
	mustEnter(t, q, "alice")
	mustEnter(t, q, "alice")
	_, err := q.enter("alice")
	if kiln.KindOf(err) != kiln.QuotaExceeded {
		t.Fatalf("alice's third waiting cell: err = %v, want quota_exceeded", err)
	}
	if _, err := q.enter("bob"); err != nil {
		t.Fatalf("bob after alice's share is full: %v", err)
	}
	// A full queue is the server's condition, whoever asks.
	q = newQueue(1, 1, 1, 1)
	runNow(t, "a", mustEnter(t, q, "alice"))
	mustEnter(t, q, "alice")
	if _, err := q.enter("alice"); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a full queue whose one place is alice's: err = %v, want ErrQueueFull", err)
	}
}

// TestQueueUnderChurn: many users entering, waiting, giving up and
// finishing at once never exceed the caps, never lose a slot, and leave
// the queue empty.
func TestQueueUnderChurn(t *testing.T) {
	const maxRun, perUser = 4, 2
	q := newQueue(maxRun, perUser, 1000, 1000)
	var wg sync.WaitGroup
	var over atomic.Int64
	for g := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", g%7)
			for i := range 100 {
				tk, err := q.enter(user)
				if err != nil {
					t.Error(err)
					return
				}
				ctx, cancel := context.WithCancel(context.Background())
				if i%5 == 0 {
					cancel() // gives up at once, or soon
				}
				if err := tk.run(ctx, nil); err == nil {
					q.mu.Lock()
					if q.running > maxRun || q.users[user].running > perUser {
						over.Add(1)
					}
					q.mu.Unlock()
					time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
				}
				tk.release()
				cancel()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the queue stalled: depth %d running %d ring %v", q.depth(), q.busy(), q.ring)
	}
	if over.Load() > 0 {
		t.Errorf("%d admissions went over a cap", over.Load())
	}
	if q.depth() != 0 || q.busy() != 0 || len(q.users) != 0 || len(q.ring) != 0 {
		t.Errorf("after all released: depth %d running %d users %v ring %v", q.depth(), q.busy(), q.users, q.ring)
	}
}
