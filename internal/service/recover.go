package service

import (
	"context"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// Notices for what a restart did to a session.
const (
	noticeResumed     = "kiln restarted since the last cell: the kernel state is lost; the workspace files are intact"
	noticeInterrupted = "kiln stopped while this cell ran; its output up to then is lost"
)

// recover takes over from a previous run of the service. Sessions whose
// workspace survived come back without a sandbox (one is made on first
// use, with fresh kernels); the others are ended with the reason. Cells
// that were running are recorded as interrupted. Workspaces that no
// active session owns (a crashed run's pool, a half-made session) are
// removed. The native backend has already removed the old sandboxes,
// cgroups and mounts when it started.
func (s *Service) recover(ctx context.Context) error {
	active, err := s.recoverable(ctx)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, rec := range active {
		// A disk workspace is mounted again here after a reboot.
		err := s.ws.Restore(rec.ID)
		if err != nil && kiln.KindOf(err) != kiln.NotFound {
			// Its image is there but does not mount: refuse to start
			// rather than end the session and remove its files.
			return kiln.Wrap(kiln.Unavailable, err, "cannot restore the workspace of session %s; fix or remove its image, then start again", rec.ID)
		}
		if err != nil {
			if err := s.store.EndSession(ctx, rec.UserID, rec.ID, ReasonLost, time.Now()); err != nil {
				return err
			}
			s.audit(ctx, store.AuditEntry{UserID: rec.UserID, Action: "session.end", SessionID: rec.ID, Outcome: ReasonLost})
			s.metrics.SessionEnded("restart_lost")
		} else {
			keep[rec.ID] = true
			l := s.resumedLive(rec)
			l.notice = noticeResumed
			s.sessions[rec.ID] = l
		}
		if err := s.finishRunning(ctx, rec); err != nil {
			return err
		}
	}
	ids, err := s.ws.List()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !keep[id] {
			if err := s.ws.Remove(id); err != nil {
				s.log.Error("remove orphaned workspace", "id", id, "err", err)
			}
		}
	}
	if len(active) > 0 || len(ids) > len(keep) {
		s.log.Info("recovered from the previous run", "resumed", len(keep), "ended", len(active)-len(keep), "orphaned_workspaces", len(ids)-len(keep))
	}
	return nil
}

// resumedLive is an active session without a sandbox, as a restart or a
// takeover (replicas.go) finds it; its workspace is in place.
func (s *Service) resumedLive(rec kiln.Session) *live {
	l := newLive(rec, s.ws.Path(rec.ID), nil)
	l.nets = s.nets
	// Its stored policy, which its next sandbox's proxy session opens
	// with (not re-checked against the ceiling: it was checked when set,
	// by its owner or an admin).
	l.policy = rec.Network.Normal()
	// Its stored mounts, checked against today's roots, and the user's
	// build caches.
	l.mounts = s.sandboxMounts(s.resumedMounts(rec))
	l.buildCache = s.buildCacheFor(kiln.User{ID: rec.UserID}, "")
	return l
}

// finishRunning records the session's running cells as interrupted.
func (s *Service) finishRunning(ctx context.Context, rec kiln.Session) error {
	p := store.Page{Limit: store.MaxLimit}
	for {
		execs, next, err := s.store.ListExecutions(ctx, rec.UserID, rec.ID, p)
		if err != nil {
			return err
		}
		for _, e := range execs {
			if e.Status != kiln.ExecRunning {
				continue
			}
			res := kiln.CellResult{Language: e.Language, Status: kiln.StatusInterrupted, Notice: noticeInterrupted}
			if err := s.store.FinishExecution(ctx, rec.UserID, e.ID, res, time.Now()); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		p.Cursor = next
	}
}

// expireIdle ends sessions idle for longer than their TTL, until Close.
func (s *Service) expireIdle() {
	defer s.done.Done()
	t := time.NewTicker(s.cfg.IdleCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.expire(now)
		}
	}
}

func (s *Service) expire(now time.Time) {
	s.mu.Lock()
	var idle []*live
	for _, l := range s.sessions {
		if since, ok := l.idleSince(); ok && now.Sub(since) > l.rec.IdleTTL {
			idle = append(idle, l)
		}
	}
	s.mu.Unlock()
	if s.cfg.Replicas != nil {
		s.expireReplicas(now, idle)
		return
	}
	for _, l := range idle {
		if err := s.endSession(context.Background(), l, ReasonIdle, "idle"); err != nil && err != errEnded {
			s.log.Error("end idle session", "session", l.rec.ID, "err", err)
		}
	}
}
