package store

import (
	"context"
	"encoding/json"
	"fmt"
)

const auditCols = `id, at, user_id, action, session_id, execution_id, code_hash, outcome, detail, actor`

func scanAudit(r scanner) (AuditEntry, error) {
	var e AuditEntry
	var at int64
	var detail string
	err := r.Scan(&e.ID, &at, &e.UserID, &e.Action, &e.SessionID, &e.ExecutionID, &e.CodeHash, &e.Outcome, &detail, &e.Actor)
	e.Time, e.Detail = fromNanos(at), json.RawMessage(detail)
	return e, err
}

func (s *DB) AppendAudit(ctx context.Context, e *AuditEntry) error {
	if e.ID == "" {
		e.ID = NewID()
	}
	if e.Time.IsZero() {
		e.Time = now()
	}
	if len(e.Detail) == 0 {
		e.Detail = json.RawMessage(`{}`)
	}
	if !json.Valid(e.Detail) {
		return fmt.Errorf("append audit: detail is not JSON")
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO audit_log (`+auditCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		e.ID, nanos(e.Time), e.UserID, e.Action, e.SessionID, e.ExecutionID, e.CodeHash, e.Outcome, string(e.Detail), e.Actor)
	return s.conflict(err, "append audit")
}

func (s *DB) ListAudit(ctx context.Context, f AuditFilter, p Page) ([]AuditEntry, string, error) {
	q := query{sql: `SELECT ` + auditCols + ` FROM audit_log WHERE 1 = 1`}
	if f.UserID != "" {
		q.sql += ` AND user_id = ` + q.arg(f.UserID)
	}
	if f.SessionID != "" {
		q.sql += ` AND session_id = ` + q.arg(f.SessionID)
	}
	if f.Actor != "" {
		q.sql += ` AND actor = ` + q.arg(f.Actor)
	}
	n, err := q.page(p, "at", "id", false)
	if err != nil {
		return nil, "", err
	}
	es, err := list(ctx, s.db, q, scanAudit)
	if err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	es, next := trim(es, n, func(e AuditEntry) cursor { return cursor{N: nanos(e.Time), ID: e.ID} })
	return es, next, nil
}
