package service

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// Session handoff between live replicas (issue 15), on a backend whose
// sandboxes every replica reaches by id (SharedSandboxes). A request on
// replica B for a session live replica A holds:
//
//  1. B names itself in the session's row (release_to) and notifies A on
//     a LISTEN/NOTIFY channel, in one statement (Replicas.AskRelease);
//  2. A, woken by the notification (or, should one be lost, at its next
//     heartbeat), lets go of the session as soon as no cell runs or
//     waits and no stream or file operation is open there: it forgets
//     the sandbox without destroying it and, in one statement, makes B
//     the holder and leaves the sandbox's description in the row
//     (Replicas.Release);
//  3. B, polling the row, finds itself the holder, attaches to the
//     same sandbox through the backend (engine.AttachSession) and serves
//     the request, the kernels' state intact.
//
// B waits at most Config.HandoffWait, then takes its request back and
// answers 503 (Retry-After): the session is busy on A. NOTIFY wakes the
// holder at once, where a flag read at heartbeats would make every
// handoff wait up to a quarter of --replica-gone; the flag in the row
// stays the truth, since a notification sent while the listener's
// connection was down is lost. At every moment the row names one holder,
// and only the holder (with the session in memory) uses the sandbox.

// DefaultHandoffWait bounds a request's wait for a handoff.
const DefaultHandoffWait = 10 * time.Second

// handoffPoll is how often a waiting replica reads the session's row,
// and how often a holder asked for a busy session looks whether it is
// idle yet.
const handoffPoll = 50 * time.Millisecond

// SharedSandboxes is implemented by a backend whose Connect reaches, by
// id, a sandbox another kiln replica made (its agent is reachable from
// every replica and outlives the connection of the replica that let it
// go), and whose sandboxes keep their workspace with them rather than in
// Spec.HostDir (the replica that let go keeps its host directory, and
// removes it when it restarts). Only then are sessions handed between
// live replicas; on other backends a request for a session another live
// replica holds is refused with a conflict naming the holder.
type SharedSandboxes interface {
	SharedSandboxes() bool
}

// handoffState is a replica's handoff bookkeeping.
type handoffState struct {
	wake chan struct{} // another replica asked for a session

	mu       sync.Mutex
	waiting  map[string]chan struct{} // sessions this replica is asking for, closed when the ask ends
	arriving map[string]int           // sessions being taken over or attached here (takeOver), not yet in memory
}

// reasonMoved is the end reason of a session let go of here.
const reasonMoved = "moved to another kiln replica"

// errMoved answers a request that waited here for a session while it
// was handed to another replica.
var errMoved = &kiln.Error{Kind: kiln.Unavailable, Message: "the session moved to another kiln replica while this request waited here; send the request again"}

// arrive marks session id as coming into memory here until the returned
// func runs, so that releaseOne does not hand it away meanwhile; it waits
// for a handoff of it in progress.
func (s *Service) arrive(id string) (done func()) {
	s.handoff.mu.Lock()
	if s.handoff.arriving == nil {
		s.handoff.arriving = map[string]int{}
	}
	s.handoff.arriving[id]++
	s.handoff.mu.Unlock()
	return func() {
		s.handoff.mu.Lock()
		if s.handoff.arriving[id]--; s.handoff.arriving[id] == 0 {
			delete(s.handoff.arriving, id)
		}
		s.handoff.mu.Unlock()
	}
}

// noticeHandoffLost is the first cell's notice when a handed-over
// sandbox could not be reached.
const noticeHandoffLost = "this session moved from another kiln replica whose sandbox could not be reached here: the kernel state is lost; the history is intact"

// handoffs says whether sessions move between live replicas here.
func (s *Service) handoffs() bool {
	if s.cfg.Replicas == nil {
		return false
	}
	b, ok := s.engine.Backend().(SharedSandboxes)
	return ok && b.SharedSandboxes()
}

// serveHandoffs starts listening for other replicas' requests for this
// replica's sessions, when handoffs are on.
func (s *Service) serveHandoffs() {
	if !s.handoffs() {
		return
	}
	s.handoff.wake = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	s.done.Add(2)
	go func() {
		defer s.done.Done()
		<-s.stop
		cancel()
	}()
	go func() {
		defer s.done.Done()
		s.cfg.Replicas.Listen(ctx, s.replica, s.wakeHandoffs)
	}()
	s.done.Add(1)
	go s.releaseAsked()
}

// wakeHandoffs makes releaseAsked read the requests now.
func (s *Service) wakeHandoffs() {
	if s.handoff.wake == nil {
		return
	}
	select {
	case s.handoff.wake <- struct{}{}:
	default:
	}
}

// releaseAsked hands over the sessions other replicas ask for, each as
// soon as it is idle, until Close. The requests are read from the store
// when a notification (or the heartbeat) wakes it, and again every
// second while one waits for a busy session.
func (s *Service) releaseAsked() {
	defer s.done.Done()
	t := time.NewTicker(handoffPoll)
	defer t.Stop()
	var asked []string
	var readAt time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-s.handoff.wake:
			readAt = time.Time{}
		case <-t.C:
			if len(asked) == 0 {
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ReplicaGone/2)
		if time.Since(readAt) > time.Second {
			ids, err := s.cfg.Replicas.Releases(ctx, s.replica)
			if err != nil {
				s.log.Error("release requests", "err", err)
			} else {
				asked, readAt = ids, time.Now()
			}
		}
		left := asked[:0]
		for _, id := range asked {
			if !s.releaseOne(ctx, id) {
				left = append(left, id)
			}
		}
		asked = left
		cancel()
	}
}

// releaseOne hands session id to the replica that asked for it if the
// session is idle here, and says whether the request is settled (handed
// over, or withdrawn meanwhile).
func (s *Service) releaseOne(ctx context.Context, id string) bool {
	// Under handoff.mu, so that a request here that is bringing the
	// session into memory (arrive) either comes first, and the session
	// stays, or after, and finds it handed over.
	s.handoff.mu.Lock()
	defer s.handoff.mu.Unlock()
	l := s.lookup(id)
	if l == nil && s.handoff.arriving[id] > 0 {
		return false
	}
	var sess *engine.Session
	if l != nil {
		var ok bool
		if sess, ok = l.detach(); !ok {
			return false
		}
		s.mu.Lock()
		if s.sessions[id] == l {
			delete(s.sessions, id)
		}
		s.mu.Unlock()
	}
	box := ""
	if sess != nil {
		b, err := json.Marshal(sess.Sandbox())
		if err != nil {
			s.log.Error("describe a sandbox for a handoff", "session", id, "err", err)
		} else {
			box = string(b)
		}
	}
	to, err := s.cfg.Replicas.Release(ctx, s.replica, id, box)
	if err != nil {
		if l != nil { // keep serving it here, as before
			l.reattach(sess)
			s.mu.Lock()
			if s.sessions[id] == nil {
				s.sessions[id] = l
			}
			s.mu.Unlock()
		}
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Error("hand a session over", "session", id, "err", err)
			return false
		}
		return true
	}
	if sess != nil {
		sess.LetGo() // the new holder connects to it
	}
	if l != nil {
		// The sandbox keeps running for the new holder; its streams here
		// end and its egress session goes (the new holder's policy rules).
		// A request that took the session just before waits for its
		// cells' turn: let it through, to be told the session moved.
		s.watchers.drop(id, func(*watcher) bool { return true })
		l.netNow().close()
		l.unlockCells()
	}
	s.log.Info("session handed over to another replica", "session", id, "to", to, "sandbox", box != "")
	return true
}

// detach lets go of the session's sandbox for a handoff when nothing
// runs, waits or is open in it: the session is then ended here (no new
// cell starts on this replica) and its sandbox returned, not destroyed.
// false when it is busy.
func (l *live) detach() (*engine.Session, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended || l.busy > 0 || l.cellsAhead > 0 {
		return nil, false
	}
	select {
	case l.cells <- struct{}{}: // no cell runs; none starts here again
	default:
		return nil, false
	}
	l.ended = true
	l.endReason = reasonMoved
	sess := l.sess
	l.sess = nil
	return sess, true
}

// reattach undoes detach when the handoff did not happen.
func (l *live) reattach(sess *engine.Session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = false
	l.endReason = ""
	l.sess = sess
	<-l.cells
}

// handOver is takeOver's answer, with handoffs on, for a session live
// replica holder holds: ask for it, wait for it (at most HandoffWait),
// and attach to the sandbox it leaves. Concurrent requests here for one
// session share one ask.
func (s *Service) handOver(ctx context.Context, ownerID, id, holder string) (*live, error) {
	for {
		s.handoff.mu.Lock()
		if s.handoff.waiting == nil {
			s.handoff.waiting = map[string]chan struct{}{}
		}
		ch, other := s.handoff.waiting[id]
		if !other {
			ch = make(chan struct{})
			s.handoff.waiting[id] = ch
		}
		s.handoff.mu.Unlock()
		if !other {
			break
		}
		select { // another request here is asking: wait for its answer
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if l := s.lookup(id); l != nil {
			return l, nil
		}
		return nil, s.busyElsewhere(id, holder)
	}
	defer func() {
		s.handoff.mu.Lock()
		close(s.handoff.waiting[id])
		delete(s.handoff.waiting, id)
		s.handoff.mu.Unlock()
	}()
	if _, err := s.cfg.Replicas.AskRelease(ctx, s.replica, id); errors.Is(err, store.ErrNotFound) {
		return nil, errEnded
	} else if err != nil {
		return nil, kiln.Wrap(kiln.Unavailable, err, "cannot ask for session %s in the store", id)
	}
	withdraw := func() {
		if err := s.cfg.Replicas.Withdraw(context.WithoutCancel(ctx), s.replica, id); err != nil {
			s.log.Error("withdraw a release request", "session", id, "err", err)
		}
	}
	deadline := time.Now().Add(s.cfg.HandoffWait)
	for last := false; ; {
		h, box, err := s.cfg.Replicas.HandedOver(ctx, s.replica, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			withdraw()
			return nil, errEnded
		case err != nil:
			withdraw()
			return nil, kiln.Wrap(kiln.Unavailable, err, "cannot read session %s from the store", id)
		case h == s.replica:
			return s.attach(ctx, ownerID, id, box)
		case last:
			return nil, s.busyElsewhere(id, h)
		}
		holder = h
		if time.Now().After(deadline) {
			// Take the request back, then look once more: the holder may
			// have handed the session over just before.
			withdraw()
			last = true
			continue
		}
		select {
		case <-ctx.Done():
			withdraw()
			return nil, context.Cause(ctx)
		case <-time.After(handoffPoll):
		}
	}
}

// busyElsewhere is the answer when the holder did not hand the session
// over within the bound.
func (s *Service) busyElsewhere(id, holder string) error {
	return kiln.Errorf(kiln.Unavailable,
		"session %s is busy on kiln replica %s (a cell runs or waits there, or a stream or file transfer is open): "+
			"it moves to the replica asked once that is over; retry in a few seconds", id, holder)
}

// attach makes a session handed over to this replica live here, on the
// sandbox its last holder left (box, as engine.Session.Sandbox described
// it), or, when that cannot be reached, on a new one made at first use.
func (s *Service) attach(ctx context.Context, ownerID, id, box string) (*live, error) {
	if l := s.lookup(id); l != nil {
		return l, nil
	}
	rec, err := s.store.Session(ctx, ownerID, id)
	if err != nil {
		return nil, err
	}
	if rec.Status != kiln.SessionActive {
		return nil, errEnded
	}
	// A workspace of its own here, for a sandbox made here later; the
	// attached one keeps the one it has.
	if err := s.ws.Restore(id); err != nil {
		lim := rec.Limits.WithDefaults()
		if _, err := s.ws.Create(id, lim.WorkspaceBytes, lim.Inodes); err != nil {
			return nil, err
		}
	}
	l := s.resumedLive(rec)
	var sb backend.Sandbox
	if err := json.Unmarshal([]byte(box), &sb); err != nil || sb.ID == "" {
		l.notice = noticeHandoffLost
	} else if sess, err := s.engine.AttachSession(ctx, sb, engine.SessionSpec{Limits: rec.Limits}); err != nil {
		s.log.Warn("attach to a handed-over sandbox", "session", id, "sandbox", sb.ID, "err", err)
		l.notice = noticeHandoffLost
	} else {
		l.sess = sess
	}
	s.mu.Lock()
	if prev := s.sessions[id]; prev != nil {
		s.mu.Unlock()
		return prev, nil
	}
	s.sessions[id] = l
	s.mu.Unlock()
	s.log.Info("session handed over from another replica", "session", id, "replica", s.replica, "attached", l.sess != nil)
	s.audit(ctx, store.AuditEntry{UserID: rec.UserID, Action: "session.handoff", SessionID: id, Outcome: "ok",
		Detail: jsonDetail(map[string]any{"replica": s.replica, "attached": l.sess != nil})})
	return l, nil
}
