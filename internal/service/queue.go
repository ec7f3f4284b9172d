package service

import (
	"context"
	"sync"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// queue admits the cells and one-shot runs of all users. A slot is not a
// CPU (cgroups share the CPUs): it bounds how much runs at once, and the
// queue shares the slots fairly between users.
//
// The bound, which the tests check:
//   - a user never holds more than perUser slots;
//   - while fewer than max slots are taken, a cell of a user under that
//     cap starts at once, whatever other users run or queue;
//   - when every slot is taken, a freed slot goes to the waiting user with
//     the fewest running cells, ties in turn (round-robin). So a waiting
//     cell of a user with nothing running starts at the next release, and
//     no user's many or long cells put another user's cell further back
//     than one admission per other waiting user.
//
// At most length requests wait in all, and at most userLength of one user,
// so that one user cannot fill the line for everyone; past either the
// answer comes at once rather than a hang.
type queue struct {
	max, perUser, length, userLength int
	// shared, with several replicas, holds a ticket's user to perUser on
	// every replica together (replicas_slots.go): it waits for one of the
	// user's slots there before the ticket queues here, telling queued
	// once if it has to wait, and returns the slot's release.
	shared func(ctx context.Context, user string, perUser int, queued func()) (release func(), _ error)

	mu      sync.Mutex
	running int
	waiting int // entered and not yet running, in or out of a line
	users   map[string]*userQueue
	ring    []string // users with a cell in line, in turn order
	turn    int      // index in ring where the next tie-break starts
}

// userQueue is one user's share: slots held, places held, and the cells
// in line in arrival order.
type userQueue struct {
	running, waiting int
	line             []*ticket
}

func newQueue(max, perUser, length, userLength int) *queue {
	return &queue{max: max, perUser: min(perUser, max), length: length, userLength: min(userLength, length), users: map[string]*userQueue{}}
}

// ErrQueueFull is the answer when length requests already wait.
var ErrQueueFull = &kiln.Error{Kind: kiln.Unavailable, Message: "the execution queue is full; retry in a moment"}

// Why a cell waits, as the queued event says.
const (
	WaitSession = "session" // the session's previous cell runs (cells of a session run in order)
	WaitUser    = "user"    // the user's own cells hold all the user's slots
	WaitServer  = "server"  // every slot of the server is taken
)

// Place is a waiting cell's place in line: Position 1 is next.
type Place struct {
	Position int
	Reason   string // WaitSession, WaitUser or WaitServer
}

// ticket is one request's place: entered, in line, running, then done.
type ticket struct {
	q      *queue
	user   string
	state  ticketState
	admit  chan struct{} // closed when it may run
	shared func()        // gives back the user's slot across replicas; nil for none
}

type ticketState int

const (
	entered ticketState = iota // holds a place, not in line yet
	inLine
	running
	done
)

// enter takes a place for user, or fails at once when the queue or the
// user's share of it is full. The place is held until release; run turns
// it into a running slot.
func (q *queue) enter(user string) (*ticket, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.waiting >= q.length {
		return nil, ErrQueueFull
	}
	if u := q.users[user]; u != nil && u.waiting >= q.userLength {
		return nil, kiln.Errorf(kiln.QuotaExceeded, "you have %d cells and runs waiting, the most one user may; wait for some to finish", u.waiting)
	}
	u := q.user(user)
	q.waiting++
	u.waiting++
	return &ticket{q: q, user: user, admit: make(chan struct{})}, nil
}

func (q *queue) user(name string) *userQueue {
	u := q.users[name]
	if u == nil {
		u = &userQueue{}
		q.users[name] = u
	}
	return u
}

// run waits for a slot; ctx ends the wait. queued, when not nil, is told
// the place once if the ticket has to wait.
func (t *ticket) run(ctx context.Context, queued func(Place)) error {
	q := t.q
	if q.shared != nil {
		told := false
		release, err := q.shared(ctx, t.user, q.perUser, func() {
			if queued != nil {
				told = true
				queued(Place{Position: 1, Reason: WaitUser})
			}
		})
		if err != nil {
			return err
		}
		q.mu.Lock()
		t.shared = release
		q.mu.Unlock()
		if told {
			queued = nil // told once
		}
	}
	q.mu.Lock()
	u := q.users[t.user]
	if q.running < q.max && u.running < q.perUser && len(u.line) == 0 {
		q.start(t, u)
		q.mu.Unlock()
		return nil
	}
	t.state = inLine
	u.line = append(u.line, t)
	if len(u.line) == 1 {
		q.ring = append(q.ring, t.user)
	}
	place := q.place(t)
	q.mu.Unlock()
	if queued != nil {
		queued(place)
	}
	select {
	case <-t.admit:
		return nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.state == running {
		return nil // admitted as the wait ended; release gives the slot back
	}
	q.leaveLine(t)
	return context.Cause(ctx)
}

// start makes t running; q.mu is held.
func (q *queue) start(t *ticket, u *userQueue) {
	t.state = running
	q.running++
	q.waiting--
	u.running++
	u.waiting--
	close(t.admit)
}

// leaveLine takes a waiting ticket out of its user's line; it keeps its
// place in the queue until release. q.mu is held.
func (q *queue) leaveLine(t *ticket) {
	u := q.users[t.user]
	for i, w := range u.line {
		if w == t {
			u.line = append(u.line[:i], u.line[i+1:]...)
			break
		}
	}
	t.state = entered
	if len(u.line) == 0 {
		q.dropFromRing(t.user)
	}
}

func (q *queue) dropFromRing(user string) {
	for k, name := range q.ring {
		if name == user {
			q.ring = append(q.ring[:k], q.ring[k+1:]...)
			if k < q.turn {
				q.turn--
			}
			break
		}
	}
	if len(q.ring) == 0 || q.turn >= len(q.ring) {
		q.turn = 0
	}
}

// pick is the ring index of the user to serve next among those eligible:
// the fewest running first, ties in turn from start; -1 if none.
func pick(n, start int, running func(k int) int, eligible func(k int) bool) int {
	best := -1
	for i := range n {
		k := (start + i) % n
		if eligible(k) && (best < 0 || running(k) < running(best)) {
			best = k
		}
	}
	return best
}

// dispatch gives free slots to waiting tickets; q.mu is held.
func (q *queue) dispatch() {
	for q.running < q.max && len(q.ring) > 0 {
		k := pick(len(q.ring), q.turn,
			func(k int) int { return q.users[q.ring[k]].running },
			func(k int) bool { return q.users[q.ring[k]].running < q.perUser })
		if k < 0 {
			return // every waiting user is at its own cap
		}
		name := q.ring[k]
		u := q.users[name]
		t := u.line[0]
		u.line = u.line[1:]
		q.start(t, u)
		if len(u.line) == 0 {
			q.ring = append(q.ring[:k], q.ring[k+1:]...)
			q.turn = k // the next user moved into k
		} else {
			q.turn = k + 1
		}
		if q.turn >= len(q.ring) {
			q.turn = 0
		}
	}
}

// place estimates t's position by playing the admission rule forward as
// if every running cell belonged to nobody in line; q.mu is held.
func (q *queue) place(t *ticket) Place {
	reason := WaitServer
	if q.users[t.user].running >= q.perUser {
		reason = WaitUser
	}
	n := len(q.ring)
	runs := make([]int, n)
	next := make([]int, n)
	for k, name := range q.ring {
		runs[k] = q.users[name].running
	}
	turn := q.turn
	for pos := 1; ; pos++ {
		k := pick(n, turn, func(k int) int { return runs[k] },
			func(k int) bool { return next[k] < len(q.users[q.ring[k]].line) })
		if k < 0 {
			return Place{Position: pos, Reason: reason} // not reached: t is in a line
		}
		if q.users[q.ring[k]].line[next[k]] == t {
			return Place{Position: pos, Reason: reason}
		}
		runs[k]++
		next[k]++
		turn = (k + 1) % n
	}
}

// release gives the place or the slot back; it may be called twice.
func (t *ticket) release() {
	t.releaseHere()
	t.q.mu.Lock()
	shared := t.shared
	t.shared = nil
	t.q.mu.Unlock()
	if shared != nil {
		shared()
	}
}

func (t *ticket) releaseHere() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.users[t.user]
	switch t.state {
	case done:
		return
	case running:
		q.running--
		u.running--
	case inLine:
		q.leaveLine(t)
		fallthrough
	case entered:
		q.waiting--
		u.waiting--
	}
	t.state = done
	if u.running == 0 && u.waiting == 0 {
		delete(q.users, t.user)
	}
	q.dispatch()
}

// depth is how many wait.
func (q *queue) depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// busy is how many run.
func (q *queue) busy() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running
}
