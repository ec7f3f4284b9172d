package service

import (
	"context"
	"errors"
	"time"

	"github.com/kiln-dev/kiln/internal/store"
)

// finishRetryFor is how long a cell's result is retried into the store
// when the store fails: a database restart is over well within it.
const finishRetryFor = 30 * time.Second

// finishExecution records a cell's result, with its CPU time and its
// audit row in the same transaction (one write on the hot path). The
// cell has run, so a store
// that fails now (an outage, a restart) is waited for, with backoff, for
// finishRetryFor: a short outage then costs the caller time, not the
// result. A store that never comes back in that time leaves the
// execution running until the next start's recovery marks it
// interrupted, and the caller gets the error (503).
func (s *Service) finishExecution(ctx context.Context, f store.CellFinish) error {
	deadline := time.Now().Add(finishRetryFor)
	f.Day = s.cpu.currentDay()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := s.store.FinishCell(ctx, f)
		if err == nil {
			s.cpu.counted(f.UserID, f.Day, f.CPU)
		}
		if err == nil || errors.Is(err, store.ErrNotFound) || time.Now().Add(wait).After(deadline) {
			return err
		}
		s.log.Warn("record a cell's result: the store failed; retrying", "execution", f.ID, "err", err)
		select {
		case <-time.After(wait):
		case <-s.stop:
			return err
		}
	}
}
