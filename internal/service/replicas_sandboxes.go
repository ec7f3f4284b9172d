package service

import (
	"context"
	"encoding/json"

	"github.com/kiln-dev/kiln/internal/backend"
)

// On a backend whose sandboxes every replica reaches (SharedSandboxes), a
// session's sandbox outlives its holder: the store keeps the sandbox of
// each held session (noteSandboxes, at each heartbeat), so that the
// replica that takes the session over from a dead holder attaches to it,
// kernels intact (attachTakenOver); a holder that finds it lost a session
// lets go of the sandbox rather than destroying it under the new holder
// (letGoLost); and the sandbox of a session ended while its holder was
// gone is destroyed by the replica that ended it (destroyLeft); and the
// sandboxes of a replica gone for twice --replica-gone that no session
// will attach to (a one-shot run's, a session's not noted yet) are
// destroyed by the others (sweepOrphans). So no Pod is left behind by a
// replica that never comes back, as a replaced kiln Pod does not.

// noteSandboxes records in the store the sandbox of each session held
// here whose sandbox changed since it was last noted.
func (s *Service) noteSandboxes(ctx context.Context) {
	if !s.handoffs() {
		return
	}
	s.mu.Lock()
	ls := make([]*live, 0, len(s.sessions))
	for _, l := range s.sessions {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.mu.Lock()
		sess := l.sess
		l.mu.Unlock()
		if sess == nil || sess.ID() == l.notedSandbox() {
			continue
		}
		box, err := json.Marshal(sess.Sandbox())
		if err != nil {
			continue
		}
		if err := s.cfg.Replicas.NoteSandbox(ctx, s.replica, l.rec.ID, string(box)); err != nil {
			s.log.Error("note a session's sandbox", "session", l.rec.ID, "err", err)
			continue
		}
		l.mu.Lock()
		l.noted = sess.ID()
		l.mu.Unlock()
	}
}

func (l *live) notedSandbox() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.noted
}

// attachTakenOver attaches a session taken over from a gone holder to
// the sandbox it left, and finishes the cells the holder was running as
// interrupted: the sandbox's agent interrupted them when the holder's
// connection ended.
func (s *Service) attachTakenOver(ctx context.Context, ownerID, id, box string) (*live, error) {
	l, err := s.attach(ctx, ownerID, id, box)
	if err != nil {
		return nil, err
	}
	if err := s.finishRunning(ctx, l.rec); err != nil {
		s.log.Error("finish the cells of a taken-over session", "session", id, "err", err)
	}
	return l, nil
}

// letGoLost drops a session another replica took over from this one
// (dropLost) and lets go of its sandbox, which the new holder uses.
func (s *Service) letGoLost(ctx context.Context, l *live) {
	s.mu.Lock()
	if s.sessions[l.rec.ID] != l {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, l.rec.ID)
	s.mu.Unlock()
	s.watchers.drop(l.rec.ID, func(*watcher) bool { return true })
	l.mu.Lock()
	l.ended, l.endReason = true, ReasonTakenOver
	sess, n := l.sess, l.net
	l.sess = nil
	l.mu.Unlock()
	if sess != nil {
		sess.LetGo()
	}
	n.close()
	if err := s.ws.Remove(l.rec.ID); err != nil {
		s.log.Error("remove workspace", "session", l.rec.ID, "err", err)
	}
}

// destroyLeft destroys the sandbox (as the store noted it) of a session
// this replica ended though another held it: its holder is gone.
func (s *Service) destroyLeft(ctx context.Context, id, box string) {
	if box == "" || !s.handoffs() {
		return
	}
	var sb backend.Sandbox
	if err := json.Unmarshal([]byte(box), &sb); err != nil || sb.ID == "" {
		return
	}
	if err := s.engine.Backend().DestroySandbox(ctx, sb.ID); err != nil {
		s.log.Error("destroy the sandbox of a gone replica's session", "session", id, "sandbox", sb.ID, "err", err)
	}
}

// replicaSandboxes is a SharedSandboxes backend that labels its
// sandboxes with the replica using them (the Kubernetes backend).
type replicaSandboxes interface {
	SetReplica(id string)
	SandboxesByReplica(ctx context.Context) (map[string][]string, error)
}

// sweepOrphans destroys the sandboxes of replicas gone for twice
// --replica-gone that no active session notes: nothing will attach to
// them. Only replicas of this store's are looked at: a Pod of another
// kiln's replica, on another database, is left alone. Twice, so that a replica whose heartbeats are only late keeps its
// sandboxes (it lets go of the sessions taken over meanwhile: dropLost).
// Every replica sweeps; a sandbox destroyed twice is no error.
func (s *Service) sweepOrphans(ctx context.Context) {
	b, ok := s.engine.Backend().(replicaSandboxes)
	if !ok || !s.handoffs() {
		return
	}
	byReplica, err := b.SandboxesByReplica(ctx)
	if err != nil {
		s.log.Error("list the replicas' sandboxes", "err", err)
		return
	}
	delete(byReplica, s.replica)
	others := make([]string, 0, len(byReplica))
	for r := range byReplica {
		others = append(others, r)
	}
	gone, err := s.cfg.Replicas.Gone(ctx, others, 2*s.cfg.ReplicaGone)
	if err != nil || len(gone) == 0 {
		if err != nil {
			s.log.Error("gone replicas", "err", err)
		}
		return
	}
	boxes, err := s.cfg.Replicas.NotedSandboxes(ctx)
	if err != nil {
		s.log.Error("noted sandboxes", "err", err)
		return
	}
	noted := map[string]bool{}
	for _, box := range boxes {
		var sb backend.Sandbox
		if json.Unmarshal([]byte(box), &sb) == nil {
			noted[sb.ID] = true
		}
	}
	for _, r := range gone {
		for _, id := range byReplica[r] {
			if noted[id] {
				continue
			}
			if err := s.engine.Backend().DestroySandbox(ctx, id); err != nil {
				s.log.Error("destroy a gone replica's sandbox", "replica", r, "sandbox", id, "err", err)
				continue
			}
			s.log.Info("destroyed a gone replica's sandbox that no session uses", "replica", r, "sandbox", id)
		}
	}
}

// leaveSandboxes is Close with shared sandboxes: the sessions' sandboxes
// are noted in the store and let go of, not destroyed, and the replica
// marks itself gone, so that the next replica a session's request
// reaches takes it over at once, kernels intact (a rolling update of
// kiln's Deployment keeps the users' kernels). The agents end what
// this replica still ran there when its connections close.
func (s *Service) leaveSandboxes(ctx context.Context, all []*live) {
	s.noteSandboxes(ctx)
	for _, l := range all {
		l.mu.Lock()
		sess := l.sess
		l.sess = nil
		l.mu.Unlock()
		if sess != nil {
			sess.LetGo()
		}
	}
	if err := s.cfg.Replicas.Leave(ctx, s.replica); err != nil {
		s.log.Error("leave the replicas", "err", err)
		return
	}
	s.log.Info("left the replicas: the others take this one's sessions over, on the same sandboxes", "sessions", len(all))
}
