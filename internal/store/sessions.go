package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

const sessionCols = `id, user_id, languages, limits, metadata, status, end_reason, idle_ttl, created, last_active, ended, sandbox_id, network, mounts`

// storedLimits is the limits column: the session's limits and, in the
// same JSON object, its extended resources (GPUs), so that a session
// resumed after a restart of kiln asks for them again. A reader that
// knows only kiln.Limits ignores the extra key.
type storedLimits struct {
	kiln.Limits
	Resources map[string]int64 `json:"extended_resources,omitempty"`
}

func scanSession(r scanner) (Session, error) {
	var s Session
	var langs, limits, meta, network, mounts string
	var ttl, created, active, ended int64
	if err := r.Scan(&s.ID, &s.UserID, &langs, &limits, &meta, &s.Status, &s.EndReason, &ttl,
		&created, &active, &ended, &s.SandboxID, &network, &mounts); err != nil {
		return s, err
	}
	if mounts != "" { // '' in rows from before mounts were kept: none
		if err := json.Unmarshal([]byte(mounts), &s.Mounts); err != nil {
			return s, fmt.Errorf("session %s mounts: %w", s.ID, err)
		}
	}
	if network != "" { // '' in rows from before the policy was kept: none
		if err := json.Unmarshal([]byte(network), &s.Network); err != nil {
			return s, fmt.Errorf("session %s network: %w", s.ID, err)
		}
	}
	s.IdleTTL = time.Duration(ttl)
	s.Created, s.LastActive, s.Ended = fromNanos(created), fromNanos(active), fromNanos(ended)
	if err := json.Unmarshal([]byte(langs), &s.Languages); err != nil {
		return s, fmt.Errorf("session %s languages: %w", s.ID, err)
	}
	var lim storedLimits
	if err := json.Unmarshal([]byte(limits), &lim); err != nil {
		return s, fmt.Errorf("session %s limits: %w", s.ID, err)
	}
	s.Limits, s.Resources = lim.Limits, lim.Resources
	if err := json.Unmarshal([]byte(meta), &s.Metadata); err != nil {
		return s, fmt.Errorf("session %s metadata: %w", s.ID, err)
	}
	return s, nil
}

// scanSessionRole reads a session and, after its columns, the caller's
// role from a share ("" for the owner).
func scanSessionRole(r scanner) (Session, error) {
	var role string
	ss, err := scanSession(roleScanner{r, &role})
	ss.Role = kiln.Role(role)
	return ss, err
}

type roleScanner struct {
	r    scanner
	role *string
}

func (s roleScanner) Scan(dest ...any) error { return s.r.Scan(append(dest, s.role)...) }

func (s *DB) CreateSession(ctx context.Context, ss *Session) error {
	if ss.ID == "" {
		ss.ID = NewID()
	}
	if ss.Created.IsZero() {
		ss.Created = now()
	}
	if ss.LastActive.IsZero() {
		ss.LastActive = ss.Created
	}
	ss.Status, ss.EndReason, ss.Ended = SessionActive, "", time.Time{}
	if ss.Languages == nil {
		ss.Languages = []string{}
	}
	if ss.Metadata == nil {
		ss.Metadata = map[string]string{}
	}
	langs, err := toJSON(ss.Languages)
	if err != nil {
		return err
	}
	limits, err := toJSON(storedLimits{ss.Limits, ss.Resources})
	if err != nil {
		return err
	}
	meta, err := toJSON(ss.Metadata)
	if err != nil {
		return err
	}
	network, err := networkJSON(ss.Network)
	if err != nil {
		return err
	}
	mounts := ""
	if len(ss.Mounts) > 0 {
		if mounts, err = toJSON(ss.Mounts); err != nil {
			return err
		}
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE id = $1`, ss.UserID).Scan(&exists); err != nil {
			return one(err, "create session")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (`+sessionCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			ss.ID, ss.UserID, langs, limits, meta, string(ss.Status), "", int64(ss.IdleTTL),
			nanos(ss.Created), nanos(ss.LastActive), int64(0), ss.SandboxID, network, mounts); err != nil {
			return s.conflict(err, "create session")
		}
		for _, k := range slices.Sorted(maps.Keys(ss.Metadata)) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO session_metadata (session_id, name, value) VALUES ($1, $2, $3)`,
				ss.ID, k, ss.Metadata[k]); err != nil {
				return fmt.Errorf("create session metadata: %w", err)
			}
		}
		return nil
	})
}

func (s *DB) Session(ctx context.Context, userID, id string) (Session, error) {
	ss, err := scanSession(s.db.QueryRowContext(ctx,
		`SELECT `+sessionCols+` FROM sessions WHERE id = $1 AND user_id = $2`, id, userID))
	return ss, one(err, "get session")
}

func (s *DB) ListSessions(ctx context.Context, userID string, f SessionFilter, p Page) ([]Session, string, error) {
	// The user's own sessions (role "") and the sessions shared with the
	// user (role of the share).
	q := query{}
	q.sql = `SELECT ` + sessionCols + `, COALESCE((SELECT role FROM session_shares sh WHERE sh.session_id = sessions.id AND sh.user_id = ` +
		q.arg(userID) + `), '') FROM sessions WHERE (user_id = ` + q.arg(userID) +
		` OR id IN (SELECT session_id FROM session_shares WHERE user_id = ` + q.arg(userID) + `))`
	if f.Status != "" {
		q.sql += ` AND status = ` + q.arg(string(f.Status))
	}
	for _, k := range slices.Sorted(maps.Keys(f.Metadata)) {
		q.sql += ` AND EXISTS (SELECT 1 FROM session_metadata m WHERE m.session_id = sessions.id AND m.name = ` +
			q.arg(k) + ` AND m.value = ` + q.arg(f.Metadata[k]) + `)`
	}
	n, err := q.page(p, "created", "id", true)
	if err != nil {
		return nil, "", err
	}
	ss, err := list(ctx, s.db, q, scanSessionRole)
	if err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	ss, next := trim(ss, n, func(s Session) cursor { return cursor{N: nanos(s.Created), ID: s.ID} })
	return ss, next, nil
}

func (s *DB) TouchSession(ctx context.Context, userID, id string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET last_active = $3 WHERE id = $1 AND user_id = $2`,
		id, userID, nanos(at))
	return affected(res, err, "touch session")
}

func (s *DB) SetSandbox(ctx context.Context, userID, id, sandboxID string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET sandbox_id = $3 WHERE id = $1 AND user_id = $2`,
		id, userID, sandboxID)
	return affected(res, err, "set session sandbox")
}

func (s *DB) SetNetwork(ctx context.Context, userID, id string, p kiln.NetworkPolicy) error {
	network, err := networkJSON(p)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET network = $3 WHERE id = $1 AND user_id = $2`,
		id, userID, network)
	return affected(res, err, "set session network")
}

// networkJSON is a policy as stored: ” for none (the zero policy), so
// that most rows carry nothing.
func networkJSON(p kiln.NetworkPolicy) (string, error) {
	if p = p.Normal(); p.Mode == kiln.NetworkNone && len(p.Allow) == 0 {
		return "", nil
	}
	return toJSON(p)
}

func (s *DB) EndSession(ctx context.Context, userID, id, reason string, at time.Time) error {
	if at.IsZero() {
		at = now()
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		var status SessionStatus
		if err := tx.QueryRowContext(ctx, `SELECT status FROM sessions WHERE id = $1 AND user_id = $2`,
			id, userID).Scan(&status); err != nil {
			return one(err, "end session")
		}
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET status = $3, end_reason = $4, ended = $5
			WHERE id = $1 AND user_id = $2 AND status = $6`,
			id, userID, string(SessionEnded), reason, nanos(at), string(SessionActive))
		err = affected(res, err, "end session")
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("end session: already ended: %w", ErrConflict)
		}
		return err
	})
}

func (s *DB) ActiveSessions(ctx context.Context) ([]Session, error) {
	q := query{sql: `SELECT ` + sessionCols + ` FROM sessions WHERE status = $1 ORDER BY last_active, id`,
		args: []any{string(SessionActive)}}
	ss, err := list(ctx, s.db, q, scanSession)
	if err != nil {
		return nil, fmt.Errorf("list active sessions: %w", err)
	}
	return ss, nil
}
