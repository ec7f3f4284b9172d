package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// The per-user concurrency cap across replicas (issue 15). Each replica's
// queue caps a user's running cells and runs at --user-concurrency; with
// several replicas a cell also takes one of the user's slots in the
// database (user_cells, postgres.Replicas.TakeUserSlot) before it queues
// here, so the replicas together run at most that many of one user's
// cells. A cell that finds the user's slots taken on other replicas waits
// (queued, reason "user"), reading again every userSlotPoll. The queue's
// global bound and its fairness between users stay per replica: they
// share this machine's CPUs.

// userSlotPoll is how often a cell waiting for one of its user's slots
// on other replicas looks again.
const userSlotPoll = 100 * time.Millisecond

// heldSlots are the slot ids this replica holds, for the heartbeat to
// give back any whose release did not reach the database.
type heldSlots struct {
	mu  sync.Mutex
	ids map[string]bool
}

// userSlot waits for one of user's perUser slots across replicas.
func (s *Service) userSlot(ctx context.Context, user string, perUser int, queued func()) (func(), error) {
	b := make([]byte, 12)
	rand.Read(b)
	id := hex.EncodeToString(b)
	// Listed before it is taken, so that the heartbeat's sweep never
	// removes a slot being taken.
	s.slots.mu.Lock()
	if s.slots.ids == nil {
		s.slots.ids = map[string]bool{}
	}
	s.slots.ids[id] = true
	s.slots.mu.Unlock()
	forget := func() {
		s.slots.mu.Lock()
		delete(s.slots.ids, id)
		s.slots.mu.Unlock()
	}
	told := false
	for {
		ok, err := s.cfg.Replicas.TakeUserSlot(ctx, s.replica, user, id, perUser, s.cfg.ReplicaGone)
		if err != nil {
			forget()
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			// The database does not answer: this replica's own cap holds
			// meanwhile (and the cell's record will fail on its own).
			s.log.Error("take a user slot", "user", user, "err", err)
			return func() {}, nil
		}
		if ok {
			return func() { s.releaseSlot(id) }, nil
		}
		if !told {
			told = true
			queued()
		}
		select {
		case <-ctx.Done():
			forget()
			return nil, context.Cause(ctx)
		case <-time.After(userSlotPoll):
		}
	}
}

func (s *Service) releaseSlot(id string) {
	s.slots.mu.Lock()
	delete(s.slots.ids, id)
	s.slots.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.cfg.Replicas.ReleaseUserSlot(ctx, id); err != nil {
		s.log.Error("release a user slot", "err", err) // the heartbeat retries
	}
}

// sweepSlots gives back, at a heartbeat, the slots in the database that
// this replica no longer holds (a release that did not reach it).
func (s *Service) sweepSlots(ctx context.Context) {
	s.slots.mu.Lock()
	ids := make([]string, 0, len(s.slots.ids))
	for id := range s.slots.ids {
		ids = append(ids, id)
	}
	s.slots.mu.Unlock()
	if err := s.cfg.Replicas.KeepUserSlots(ctx, s.replica, ids); err != nil {
		s.log.Error("sweep user slots", "err", err)
	}
}
