package service

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// ExecEvents receive a cell's progress; any may be nil. Queued comes
// first when the cell has to wait: for the session's running cell
// (reason session), then for a slot (user or server), once for each;
// then Started, with the execution's id and sequence number.
type ExecEvents struct {
	engine.Events
	Queued  func(Place)
	Started func(kiln.Execution)
}

// checkCell is the service's part of a cell's rules: the session's first
// language when none is named, and the operator's cap on the timeout for
// non-admins; then the one validation (engine.CheckCell), against this
// server's configured bounds, before the cell waits in the queue.
func (s *Service) checkCell(l *live, u kiln.User, req kiln.CellRequest) (engine.CheckedCell, error) {
	if req.Language == "" {
		req.Language = l.rec.Languages[0]
	}
	if m := s.cfg.MaxLimits.Timeout; !u.Admin && m > 0 && req.Timeout > m {
		return engine.CheckedCell{}, kiln.Errorf(kiln.Forbidden, "timeout_ms %d is over this server's maximum of %d (%v); ask for at most that (only an admin may ask for more)",
			req.Timeout.Milliseconds(), m.Milliseconds(), m)
	}
	return engine.CheckCell(req, s.cellBounds())
}

// Exec runs a cell in u's session (or one shared with u as a
// collaborator: the owner is charged, u recorded as the actor), records
// it in the history, tells the session's watchers, and returns
// the finished execution. The error is non-nil when the cell could not be
// taken (not found, ended, bad input, a full queue) or its sandbox broke;
// how the cell itself ended is in the result's status.
func (s *Service) Exec(ctx context.Context, u kiln.User, sessionID string, cell kiln.CellRequest, ev ExecEvents) (kiln.Execution, error) {
	a, err := s.liveAs(ctx, u, sessionID, kiln.RoleCollaborator)
	if err != nil {
		return kiln.Execution{}, err
	}
	l, owner := a.l, a.owner
	checked, err := s.checkCell(l, u, cell)
	if err != nil {
		return kiln.Execution{}, err
	}
	req := checked.Request()
	if err := s.budgetOf(ctx, a, u); err != nil {
		return kiln.Execution{}, err
	}
	release := l.hold()
	defer release()
	t, err := s.enterQueue(owner)
	if err != nil {
		return kiln.Execution{}, err
	}
	defer t.release()
	queued := time.Now()
	if err := l.lockCells(ctx, func(n int) {
		if ev.Queued != nil {
			ev.Queued(Place{Position: n, Reason: WaitSession})
		}
	}); err != nil {
		return kiln.Execution{}, err
	}
	defer l.unlockCells()
	if err := t.run(ctx, ev.Queued); err != nil {
		return kiln.Execution{}, err
	}
	wait := time.Since(queued)
	if a.role != kiln.RoleOwner {
		// The share may have been revoked while the cell waited.
		if _, err := s.liveAs(ctx, u, sessionID, kiln.RoleCollaborator); err != nil {
			return kiln.Execution{}, err
		}
	}
	sess, err := l.sandbox(ctx, s.engine)
	if err != nil {
		s.metrics.SandboxFailure("create")
		return kiln.Execution{}, err
	}

	e := kiln.Execution{SessionID: sessionID, UserID: owner.ID, Actor: u.ID, Language: req.Language, Code: req.Code}
	if err := s.store.CreateExecution(ctx, &e); err != nil {
		return kiln.Execution{}, err
	}
	if ev.Started != nil {
		ev.Started(e)
	}
	egressOf := l.netNow()
	egressOf.beginCell(e.ID)
	s.watchers.execution(SessionStarted, e)
	res, runErr := sess.RunChecked(ctx, checked, s.watchers.cellEvents(sessionID, e.ID, ev.Events))
	if stopped := s.stoppedUnder(l, req.Language, res, runErr); stopped != nil {
		res, runErr = *stopped, nil
	}
	if runErr != nil {
		res = s.failedCell(ctx, l, sess, req.Language, runErr)
	}
	res.Egress = egressOf.endCell()
	if n := l.takeNotice(); n != "" {
		res.Notice = joinNotice(n, res.Notice)
	}
	end := time.Now()
	done := context.WithoutCancel(ctx)
	// The result, the CPU time and the audit row go in one transaction:
	// durable before the client hears the cell is done, one write.
	audit := store.AuditEntry{UserID: owner.ID, Actor: u.ID, Action: "execution", SessionID: sessionID, ExecutionID: e.ID, Time: end,
		CodeHash: e.CodeHash, Outcome: string(res.Status), Detail: jsonDetail(map[string]any{"language": req.Language, "seq": e.Seq})}
	if err := s.finishExecution(done, store.CellFinish{UserID: owner.ID, ID: e.ID, Result: res, At: end, CPU: res.Usage.CPU, Audit: &audit}); err != nil {
		return kiln.Execution{}, err
	}
	if len(res.Artifacts) > 0 {
		if err := s.store.AddArtifacts(done, owner.ID, e.ID, res.Artifacts, end); err != nil {
			s.log.Error("record artifacts", "execution", e.ID, "err", err)
		}
	}
	e.Status, e.Result, e.Ended = string(res.Status), &res, end
	s.watchers.execution(SessionDone, e)
	s.metrics.Execution(req.Language, string(res.Status), wait, end.Sub(e.Started))
	return e, nil
}

// stoppedUnder is the result of a cell whose sandbox went away under it
// because the session ended (deleted) or kiln is stopping: the cell was
// interrupted, and the notice says by what. It is nil for a cell that
// ended by itself, whose result stands.
func (s *Service) stoppedUnder(l *live, language string, res kiln.CellResult, runErr error) *kiln.CellResult {
	if runErr == nil && res.Status != kiln.StatusInterrupted {
		return nil
	}
	var notice string
	if why := l.endedFor(); why != "" {
		notice = "the session was " + why + " while this cell ran; it was interrupted"
		if why != ReasonDeleted {
			notice = "the session ended (" + why + ") while this cell ran; it was interrupted"
		}
	} else if s.stopping() {
		notice = noticeInterrupted
	} else {
		return nil
	}
	if runErr != nil {
		res = kiln.CellResult{Language: language}
	}
	res.Status, res.Error = kiln.StatusInterrupted, nil
	res.Notice = joinNotice(notice, res.Notice)
	return &res
}

// enterQueue takes u's place in the execution queue.
func (s *Service) enterQueue(u kiln.User) (*ticket, error) {
	t, err := s.queue.enter(u.ID)
	if err != nil {
		reason := "queue_full"
		if kiln.KindOf(err) == kiln.QuotaExceeded {
			reason = "quota"
		}
		s.metrics.Rejected(reason)
	}
	return t, err
}

// failedCell is the result recorded for a cell that could not run: a
// broken sandbox is dropped, and the next cell gets a new one on the same
// workspace.
func (s *Service) failedCell(ctx context.Context, l *live, sess *engine.Session, language string, err error) kiln.CellResult {
	res := kiln.CellResult{Language: language, Status: kiln.StatusError,
		Error: &kiln.CellError{Name: "KilnError", Message: kiln.Message(err)}}
	if k := kiln.KindOf(err); k == kiln.SandboxError || k == kiln.Internal {
		s.metrics.SandboxFailure("exec")
		s.log.Error("cell failed in the sandbox", "session", l.rec.ID, "err", err)
		l.dropSandbox(context.WithoutCancel(ctx), sess, "the session's sandbox failed and was replaced: kernel state is lost; the files are intact")
		res.Error.Name = "SandboxError"
	}
	return res
}

func joinNotice(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

// Execution returns one of u's executions, or one of a session shared
// with u.
func (s *Service) Execution(ctx context.Context, u kiln.User, id string) (kiln.Execution, error) {
	e, err := s.store.Execution(ctx, u.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return s.store.SharedExecution(ctx, u.ID, id)
	}
	return e, err
}

// History pages through a session's executions, oldest first: u's
// session's or a shared one's.
func (s *Service) History(ctx context.Context, u kiln.User, sessionID string, p store.Page) ([]kiln.Execution, string, error) {
	a, err := s.authorize(ctx, u, sessionID, kiln.RoleViewer)
	if err != nil {
		return nil, "", err
	}
	return s.store.ListExecutions(ctx, a.owner.ID, sessionID, p)
}

func jsonDetail(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}
