package service

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// Shared sessions. The owner of a session shares it with another user as
// a viewer (history, outputs, files) or a collaborator (also runs cells,
// writes files, interrupts and restarts); only the owner deletes the
// session and manages its shares. Everything done in a shared session is
// the owner's: the queue, the CPU budget, the history and the audit log
// charge the owner, and the actor (who did it) is recorded beside.
//
// Nothing about a share is cached: every request reads it from the store
// (roleIn), so a revoked share answers 404 on the very next request, and
// revoking closes the user's open event streams of the session.

// MaxSharesPerSession bounds the users one session is shared with.
const MaxSharesPerSession = 32

// access is a caller's way into a session: who owns it (and is charged)
// and the caller's role. l is the live session, nil when it has ended.
type access struct {
	l     *live
	owner kiln.User // only the ID is set: what charging needs
	role  kiln.Role
}

// roleIn is the one place that decides what u may do in session id: the
// owner's role for u's own session, a share's role for a session shared
// with u, and store.ErrNotFound otherwise (a stranger learns nothing,
// not even that the session exists).
func (s *Service) roleIn(ctx context.Context, u kiln.User, id string) (ownerID string, _ kiln.Role, _ error) {
	if l := s.lookup(id); l != nil && l.rec.UserID == u.ID {
		return u.ID, kiln.RoleOwner, nil
	}
	if _, err := s.store.Session(ctx, u.ID, id); err == nil {
		return u.ID, kiln.RoleOwner, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", "", err
	}
	sh, err := s.store.Share(ctx, id, u.ID)
	if err != nil {
		return "", "", err
	}
	return sh.OwnerID, sh.Role, nil
}

// authorize is roleIn with the role an action needs: a shared user whose
// role is short of it gets Forbidden, which says what the role allows.
func (s *Service) authorize(ctx context.Context, u kiln.User, id string, need kiln.Role) (access, error) {
	ownerID, role, err := s.roleIn(ctx, u, id)
	if err != nil {
		return access{}, err
	}
	if !role.Allows(need) {
		return access{}, forbidden(role, need)
	}
	a := access{owner: kiln.User{ID: ownerID}, role: role}
	if l := s.lookup(id); l != nil && l.rec.UserID == ownerID {
		a.l = l
	}
	return a, nil
}

func forbidden(role, need kiln.Role) error {
	what := map[kiln.Role]string{
		kiln.RoleCollaborator: "running cells, writing files, interrupting and restarting need the collaborator role",
		kiln.RoleOwner:        "only the session's owner may delete it or manage its shares",
	}[need]
	return kiln.Errorf(kiln.Forbidden, "the session is shared with you as %s: %s", role, what)
}

// liveAs is authorize for an action on the running session: a conflict
// when the session has ended.
func (s *Service) liveAs(ctx context.Context, u kiln.User, id string, need kiln.Role) (access, error) {
	a, err := s.authorize(ctx, u, id, need)
	if err != nil {
		return a, err
	}
	if a.l == nil {
		a.l, err = s.takeOver(ctx, a.owner.ID, id) // errEnded without replicas
	}
	return a, err
}

// budgetOf checks the owner's CPU budget, in words for a collaborator
// when it is spent.
func (s *Service) budgetOf(ctx context.Context, a access, u kiln.User) error {
	err := s.checkBudget(ctx, a.owner)
	var ke *kiln.Error
	if err != nil && a.role != kiln.RoleOwner && errors.As(err, &ke) && ke.Kind == kiln.QuotaExceeded {
		return kiln.Errorf(kiln.QuotaExceeded, "the session's owner has used the day's CPU budget, which cells in this shared session count against: %s", ke.Message)
	}
	return err
}

// ShareSession shares u's session with the user userID as role, or
// changes the role of an existing share (created false).
func (s *Service) ShareSession(ctx context.Context, u kiln.User, sessionID, userID string, role kiln.Role) (sh store.Share, created bool, _ error) {
	if role != kiln.RoleViewer && role != kiln.RoleCollaborator {
		return sh, false, kiln.Errorf(kiln.Invalid, "role %q is not one of: viewer, collaborator", trunc(string(role), 40))
	}
	a, err := s.authorize(ctx, u, sessionID, kiln.RoleOwner)
	if err != nil {
		return sh, false, err
	}
	if userID == a.owner.ID {
		return sh, false, kiln.Errorf(kiln.Invalid, "the session is %s's own; share it with another user", trunc(userID, 100))
	}
	sh = store.Share{SessionID: sessionID, UserID: userID, Role: role}
	created, err = s.store.PutShare(ctx, a.owner.ID, &sh, MaxSharesPerSession)
	if err != nil {
		return sh, false, err
	}
	s.audit(ctx, store.AuditEntry{UserID: a.owner.ID, Actor: u.ID, Action: "session.share", SessionID: sessionID, Outcome: "ok",
		Detail: jsonDetail(map[string]any{"user": userID, "role": role})})
	return sh, created, nil
}

// RevokeShare ends userID's share of u's session. From the next request
// on that user gets 404, and the user's open event streams of the
// session close now.
func (s *Service) RevokeShare(ctx context.Context, u kiln.User, sessionID, userID string) error {
	a, err := s.authorize(ctx, u, sessionID, kiln.RoleOwner)
	if err != nil {
		return err
	}
	if err := s.store.DeleteShare(ctx, a.owner.ID, sessionID, userID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return kiln.Errorf(kiln.NotFound, "the session is not shared with user %q", trunc(userID, 100))
		}
		return err
	}
	s.watchers.drop(sessionID, func(w *watcher) bool { return w.user == userID })
	s.audit(ctx, store.AuditEntry{UserID: a.owner.ID, Actor: u.ID, Action: "session.unshare", SessionID: sessionID, Outcome: "ok",
		Detail: jsonDetail(map[string]any{"user": userID})})
	return nil
}

// Shares lists the shares of u's session.
func (s *Service) Shares(ctx context.Context, u kiln.User, sessionID string) ([]store.Share, error) {
	a, err := s.authorize(ctx, u, sessionID, kiln.RoleOwner)
	if err != nil {
		return nil, err
	}
	return s.store.ListShares(ctx, a.owner.ID, sessionID)
}

// SessionEvent is one event of a session's stream (WatchSession): a cell
// of any user of the session started, wrote output, or finished.
type SessionEvent struct {
	Type        string          // SessionStarted, SessionStdout, SessionStderr, SessionDisplay, SessionDone
	ExecutionID string          // every event's
	Execution   *kiln.Execution // started and done: the execution (done: with its result)
	Data        []byte          // stdout, stderr
	Output      *kiln.Output    // display
}

// Session event types.
const (
	SessionStarted = "started"
	SessionStdout  = "stdout"
	SessionStderr  = "stderr"
	SessionDisplay = "display"
	SessionDone    = "done"
)

// watchBuffer is how many events a watcher may fall behind before it is
// dropped: a slow reader never slows a cell down.
const watchBuffer = 512

// MaxWatchersPerSession bounds the open event streams of one session (a
// goroutine and a buffer each), whoever opened them.
const MaxWatchersPerSession = 64

// WatchSession streams the events of every cell of the session, whoever
// runs it, to u (the owner or a user it is shared with). The channel
// closes when stop is called, when u's share is revoked, when the session
// ends, or when u falls behind by more than watchBuffer events (then
// lagged says so: the client should read the history and watch again).
// Watching does not keep the session from going idle.
func (s *Service) WatchSession(ctx context.Context, u kiln.User, sessionID string) (_ <-chan SessionEvent, lagged func() bool, stop func(), _ error) {
	a, err := s.liveAs(ctx, u, sessionID, kiln.RoleViewer)
	if err != nil {
		return nil, nil, nil, err
	}
	w := &watcher{user: u.ID, ch: make(chan SessionEvent, watchBuffer)}
	if !s.watchers.add(a.l.rec.ID, w, MaxWatchersPerSession) {
		return nil, nil, nil, kiln.Errorf(kiln.QuotaExceeded, "the session has %d open event streams, the most allowed; close one first", MaxWatchersPerSession)
	}
	// A revoke between the check above and add would miss w: check again.
	if _, err := s.authorize(ctx, u, sessionID, kiln.RoleViewer); err != nil {
		s.watchers.remove(sessionID, w)
		return nil, nil, nil, err
	}
	return w.ch, w.lagging, func() { s.watchers.remove(sessionID, w) }, nil
}

// watcher is one open event stream of a session.
type watcher struct {
	user   string
	ch     chan SessionEvent
	closed bool // under watchers.mu
	lagged atomic.Bool
}

func (w *watcher) lagging() bool { return w.lagged.Load() }

// watchers are the open event streams, by session. The zero value is
// ready.
type watchers struct {
	mu sync.Mutex
	by map[string]map[*watcher]struct{}
}

// add adds w to the session's watchers, unless it has max already.
func (ws *watchers) add(session string, w *watcher, max int) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.by[session]) >= max {
		return false
	}
	if ws.by == nil {
		ws.by = map[string]map[*watcher]struct{}{}
	}
	if ws.by[session] == nil {
		ws.by[session] = map[*watcher]struct{}{}
	}
	ws.by[session][w] = struct{}{}
	return true
}

func (ws *watchers) remove(session string, w *watcher) {
	ws.drop(session, func(x *watcher) bool { return x == w })
}

// drop closes the session's watchers that match.
func (ws *watchers) drop(session string, match func(*watcher) bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.by[session] {
		if match(w) {
			ws.closeLocked(session, w)
		}
	}
}

func (ws *watchers) closeLocked(session string, w *watcher) {
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
	delete(ws.by[session], w)
	if len(ws.by[session]) == 0 {
		delete(ws.by, session)
	}
}

// publish gives e to every watcher of the session without waiting; one
// whose buffer is full is closed as lagged.
func (ws *watchers) publish(session string, e SessionEvent) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.by[session] {
		select {
		case w.ch <- e:
		default:
			w.lagged.Store(true)
			ws.closeLocked(session, w)
		}
	}
}

// cellEvents passes a cell's events on to events and to the session's
// watchers. Output is copied: the engine may reuse its buffers.
func (ws *watchers) cellEvents(session, execID string, events kiln.CellEvents) kiln.CellEvents {
	text := func(typ string, next func([]byte)) func([]byte) {
		return func(p []byte) {
			if next != nil {
				next(p)
			}
			ws.publish(session, SessionEvent{Type: typ, ExecutionID: execID, Data: append([]byte(nil), p...)})
		}
	}
	out := events
	out.Stdout = text(SessionStdout, events.Stdout)
	out.Stderr = text(SessionStderr, events.Stderr)
	out.Output = func(o kiln.Output) {
		if events.Output != nil {
			events.Output(o)
		}
		ws.publish(session, SessionEvent{Type: SessionDisplay, ExecutionID: execID, Output: &o})
	}
	return out
}

// execution publishes a started or done event with a copy of e.
func (ws *watchers) execution(typ string, e kiln.Execution) {
	ws.publish(e.SessionID, SessionEvent{Type: typ, ExecutionID: e.ID, Execution: &e})
}
