package service

import (
	"context"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// Workspace gives access to u's session's workspace. Every file operation
// goes through the session's agent, inside the sandbox, so a symlink that
// user code planted can only point inside that same sandbox. The session
// counts as busy (not idle) until release is called.
func (s *Service) Workspace(ctx context.Context, u store.User, sessionID string) (_ *agentclient.Client, release func(), _ error) {
	l, err := s.liveFor(ctx, u, sessionID)
	if err != nil {
		return nil, nil, err
	}
	release = l.hold()
	sess, err := l.sandbox(ctx, s.engine)
	if err != nil {
		release()
		return nil, nil, err
	}
	return sess.Agent(), release, nil
}

// Hold keeps u's session from being idle until release is called, for a
// stream that is open without a cell running.
func (s *Service) Hold(ctx context.Context, u store.User, sessionID string) (release func(), _ error) {
	l, err := s.liveFor(ctx, u, sessionID)
	if err != nil {
		return nil, err
	}
	return l.hold(), nil
}

// FileChanged records a change to a workspace in the audit log: action is
// file.write, file.delete, file.mkdir, file.move or file.extract.
func (s *Service) FileChanged(ctx context.Context, u store.User, sessionID, action string, detail map[string]any, err error) {
	outcome := "ok"
	if err != nil {
		outcome = string(kiln.KindOf(err))
	}
	s.audit(ctx, store.AuditEntry{UserID: u.ID, Action: action, SessionID: sessionID, Outcome: outcome, Detail: jsonDetail(detail)})
}
