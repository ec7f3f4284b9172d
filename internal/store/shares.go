package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Share gives a user other than the owner a role in a session.
type Share struct {
	SessionID string
	UserID    string    // the user the session is shared with
	OwnerID   string    // the session's owner (read from the session)
	Role      kiln.Role // RoleViewer or RoleCollaborator
	Created   time.Time
}

// Shares keeps who else may use a session. Nothing is cached: a deleted
// share is gone for the next query.
type Shares interface {
	// PutShare shares the owner's session with sh.UserID as sh.Role, or
	// changes the role of an existing share (created is false then); at
	// most max shares per session. ErrNotFound when the owner has no
	// such session; a NotFound error naming the user when there is no
	// such user; a QuotaExceeded error past max.
	PutShare(ctx context.Context, ownerID string, sh *Share, max int) (created bool, _ error)
	// DeleteShare revokes a share; ErrNotFound when there is none.
	DeleteShare(ctx context.Context, ownerID, sessionID, userID string) error
	// ListShares lists the shares of the owner's session, oldest first.
	ListShares(ctx context.Context, ownerID, sessionID string) ([]Share, error)
	// Share returns userID's share of a session, with its owner;
	// ErrNotFound when there is none.
	Share(ctx context.Context, sessionID, userID string) (Share, error)
	// SharedExecution returns an execution of a session shared with
	// userID; ErrNotFound otherwise.
	SharedExecution(ctx context.Context, userID, id string) (Execution, error)
}

func (s *DB) PutShare(ctx context.Context, ownerID string, sh *Share, max int) (created bool, _ error) {
	if sh.Created.IsZero() {
		sh.Created = now()
	}
	sh.OwnerID = ownerID
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = $1 AND user_id = $2`,
			sh.SessionID, ownerID).Scan(&exists); err != nil {
			return one(err, "share session")
		}
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE id = $1`, sh.UserID).Scan(&exists); err != nil {
			if err == sql.ErrNoRows {
				return kiln.Errorf(kiln.NotFound, "no user %q", trunc(sh.UserID, 100))
			}
			return fmt.Errorf("share session: %w", err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE session_shares SET role = $3 WHERE session_id = $1 AND user_id = $2`,
			sh.SessionID, sh.UserID, string(sh.Role))
		if err := affected(res, err, "share session"); err == nil {
			return nil
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM session_shares WHERE session_id = $1`, sh.SessionID).Scan(&n); err != nil {
			return fmt.Errorf("count shares: %w", err)
		}
		if n >= max {
			return kiln.Errorf(kiln.QuotaExceeded, "the session is shared with %d users, the most allowed; revoke a share first", n)
		}
		created = true
		_, err = tx.ExecContext(ctx, `INSERT INTO session_shares (session_id, user_id, role, created) VALUES ($1, $2, $3, $4)`,
			sh.SessionID, sh.UserID, string(sh.Role), nanos(sh.Created))
		return s.conflict(err, "share session")
	})
	if err != nil {
		return false, err
	}
	if !created {
		// The existing share keeps its time.
		cur, err := s.Share(ctx, sh.SessionID, sh.UserID)
		if err != nil {
			return false, err
		}
		*sh = cur
	}
	return created, nil
}

func (s *DB) DeleteShare(ctx context.Context, ownerID, sessionID, userID string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM session_shares WHERE session_id = $1 AND user_id = $2
		AND session_id IN (SELECT id FROM sessions WHERE user_id = $3)`, sessionID, userID, ownerID)
	return affected(res, err, "revoke share")
}

const shareCols = `sh.session_id, sh.user_id, s.user_id, sh.role, sh.created`

func scanShare(r scanner) (Share, error) {
	var sh Share
	var created int64
	var role string
	err := r.Scan(&sh.SessionID, &sh.UserID, &sh.OwnerID, &role, &created)
	sh.Role, sh.Created = kiln.Role(role), fromNanos(created)
	return sh, err
}

func (s *DB) ListShares(ctx context.Context, ownerID, sessionID string) ([]Share, error) {
	if err := s.owns(ctx, ownerID, sessionID); err != nil {
		return nil, err
	}
	q := query{}
	q.sql = `SELECT ` + shareCols + ` FROM session_shares sh JOIN sessions s ON s.id = sh.session_id
		WHERE sh.session_id = ` + q.arg(sessionID) + ` ORDER BY sh.created, sh.user_id`
	out, err := list(ctx, s.db, q, scanShare)
	if err != nil {
		return nil, fmt.Errorf("list shares: %w", err)
	}
	return out, nil
}

func (s *DB) Share(ctx context.Context, sessionID, userID string) (Share, error) {
	sh, err := scanShare(s.db.QueryRowContext(ctx, `SELECT `+shareCols+` FROM session_shares sh
		JOIN sessions s ON s.id = sh.session_id WHERE sh.session_id = $1 AND sh.user_id = $2`, sessionID, userID))
	return sh, one(err, "get share")
}

func (s *DB) SharedExecution(ctx context.Context, userID, id string) (Execution, error) {
	e, err := scanExecution(s.db.QueryRowContext(ctx, `SELECT `+execCols+` FROM executions
		WHERE id = $1 AND session_id IN (SELECT session_id FROM session_shares WHERE user_id = $2)`, id, userID))
	return e, one(err, "get execution")
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
