package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

const execCols = `id, session_id, user_id, seq, language, code, code_hash, status, result, started, ended, actor`

func scanExecution(r scanner) (Execution, error) {
	var e Execution
	var result string
	var started, ended int64
	if err := r.Scan(&e.ID, &e.SessionID, &e.UserID, &e.Seq, &e.Language, &e.Code, &e.CodeHash, &e.Status,
		&result, &started, &ended, &e.Actor); err != nil {
		return e, err
	}
	e.Started, e.Ended = fromNanos(started), fromNanos(ended)
	if result != "" {
		e.Result = new(kiln.CellResult)
		if err := json.Unmarshal([]byte(result), e.Result); err != nil {
			return e, fmt.Errorf("execution %s result: %w", e.ID, err)
		}
	}
	return e, nil
}

func (s *DB) CreateExecution(ctx context.Context, e *Execution) error {
	if e.ID == "" {
		e.ID = NewID()
	}
	if e.CodeHash == "" {
		e.CodeHash = HashCode(e.Code)
	}
	if e.Status == "" {
		e.Status = ExecRunning
	}
	if e.Started.IsZero() {
		e.Started = now()
	}
	result := ""
	if e.Result != nil {
		b, err := json.Marshal(e.Result)
		if err != nil {
			return err
		}
		result = string(b)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		// The counter row is locked until commit (a row lock on PostgreSQL,
		// the database write lock on SQLite), so concurrent executions of
		// one session get consecutive numbers, and a rollback returns its
		// number.
		var seq int64
		err := s.queryRow(ctx, tx, `UPDATE sessions SET exec_count = exec_count + 1,
			last_active = CASE WHEN last_active < $3 THEN $3 ELSE last_active END
			WHERE id = $1 AND user_id = $2 RETURNING exec_count`,
			e.SessionID, e.UserID, nanos(e.Started)).Scan(&seq)
		if err != nil {
			return one(err, "create execution")
		}
		e.Seq = seq
		_, err = s.exec(ctx, tx, `INSERT INTO executions (`+execCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			e.ID, e.SessionID, e.UserID, e.Seq, e.Language, e.Code, e.CodeHash, e.Status, result,
			nanos(e.Started), nanos(e.Ended), e.Actor)
		return s.conflict(err, "create execution")
	})
}

const finishExecSQL = `UPDATE executions SET status = $3, result = $4, ended = $5 WHERE id = $1 AND user_id = $2`

func (s *DB) FinishExecution(ctx context.Context, userID, id string, result kiln.CellResult, at time.Time) error {
	if at.IsZero() {
		at = now()
	}
	b, err := json.Marshal(result)
	if err != nil {
		return err
	}
	res, err := s.exec(ctx, nil, finishExecSQL, id, userID, string(result.Status), string(b), nanos(at))
	return affected(res, err, "finish execution")
}

func (s *DB) Execution(ctx context.Context, userID, id string) (Execution, error) {
	e, err := scanExecution(s.db.QueryRowContext(ctx,
		`SELECT `+execCols+` FROM executions WHERE id = $1 AND user_id = $2`, id, userID))
	return e, one(err, "get execution")
}

// owns returns ErrNotFound unless the user owns the session.
func (s *DB) owns(ctx context.Context, userID, sessionID string) error {
	var exists int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = $1 AND user_id = $2`,
		sessionID, userID).Scan(&exists)
	return one(err, "get session")
}

func (s *DB) ListExecutions(ctx context.Context, userID, sessionID string, p Page) ([]Execution, string, error) {
	if err := s.owns(ctx, userID, sessionID); err != nil {
		return nil, "", err
	}
	q := query{}
	q.sql = `SELECT ` + execCols + ` FROM executions WHERE session_id = ` + q.arg(sessionID) +
		` AND user_id = ` + q.arg(userID)
	n, err := q.page(p, "seq", "", false)
	if err != nil {
		return nil, "", err
	}
	es, err := list(ctx, s.db, q, scanExecution)
	if err != nil {
		return nil, "", fmt.Errorf("list executions: %w", err)
	}
	es, next := trim(es, n, func(e Execution) cursor { return cursor{N: e.Seq} })
	return es, next, nil
}

const artifactCols = `id, session_id, execution_id, user_id, path, size, change, created`

func scanArtifact(r scanner) (Artifact, error) {
	var a Artifact
	var created int64
	err := r.Scan(&a.ID, &a.SessionID, &a.ExecutionID, &a.UserID, &a.Path, &a.Size, &a.Change, &created)
	a.Created = fromNanos(created)
	return a, err
}

func (s *DB) AddArtifacts(ctx context.Context, userID, executionID string, arts []kiln.Artifact, at time.Time) error {
	if at.IsZero() {
		at = now()
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		var sessionID string
		if err := tx.QueryRowContext(ctx, `SELECT session_id FROM executions WHERE id = $1 AND user_id = $2`,
			executionID, userID).Scan(&sessionID); err != nil {
			return one(err, "add artifacts")
		}
		for _, a := range arts {
			if _, err := tx.ExecContext(ctx, `INSERT INTO artifacts (`+artifactCols+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				NewID(), sessionID, executionID, userID, a.Path, a.Size, a.Change, nanos(at)); err != nil {
				return fmt.Errorf("add artifact: %w", err)
			}
		}
		return nil
	})
}

func (s *DB) ListArtifacts(ctx context.Context, userID, sessionID, executionID string, p Page) ([]Artifact, string, error) {
	if err := s.owns(ctx, userID, sessionID); err != nil {
		return nil, "", err
	}
	q := query{}
	q.sql = `SELECT ` + artifactCols + ` FROM artifacts WHERE session_id = ` + q.arg(sessionID) +
		` AND user_id = ` + q.arg(userID)
	if executionID != "" {
		var exists int
		err := s.db.QueryRowContext(ctx, `SELECT 1 FROM executions WHERE id = $1 AND session_id = $2 AND user_id = $3`,
			executionID, sessionID, userID).Scan(&exists)
		if err := one(err, "get execution"); err != nil {
			return nil, "", err
		}
		q.sql += ` AND execution_id = ` + q.arg(executionID)
	}
	n, err := q.page(p, "created", "id", false)
	if err != nil {
		return nil, "", err
	}
	as, err := list(ctx, s.db, q, scanArtifact)
	if err != nil {
		return nil, "", fmt.Errorf("list artifacts: %w", err)
	}
	as, next := trim(as, n, func(a Artifact) cursor { return cursor{N: nanos(a.Created), ID: a.ID} })
	return as, next, nil
}

// CellFinish is what a finished cell records: FinishExecution's result,
// the CPU time AddCPU adds to the user's day, and the audit row. A
// one-shot run has no execution: its ID is empty.
type CellFinish struct {
	UserID, ID string
	Result     kiln.CellResult
	At         time.Time
	Day        string        // the UTC day (YYYY-MM-DD) the CPU time counts for
	CPU        time.Duration // 0 adds nothing
	Audit      *AuditEntry   // nil appends nothing
}

// FinishCell records f in one transaction: a warm cell's hot path writes
// once at its end instead of three times.
func (s *DB) FinishCell(ctx context.Context, f CellFinish) error {
	if f.At.IsZero() {
		f.At = now()
	}
	var b []byte
	if f.ID != "" {
		var err error
		if b, err = json.Marshal(f.Result); err != nil {
			return err
		}
	}
	a := f.Audit
	if a != nil {
		if a.ID == "" {
			a.ID = NewID()
		}
		if a.Time.IsZero() {
			a.Time = f.At
		}
		if len(a.Detail) == 0 {
			a.Detail = json.RawMessage(`{}`)
		}
		if !json.Valid(a.Detail) {
			return fmt.Errorf("finish cell: the audit detail is not JSON")
		}
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if f.ID != "" {
			res, err := s.exec(ctx, tx, finishExecSQL, f.ID, f.UserID, string(f.Result.Status), string(b), nanos(f.At))
			if err := affected(res, err, "finish execution"); err != nil {
				return err
			}
		}
		if f.CPU > 0 {
			if _, err := s.exec(ctx, tx, `INSERT INTO cpu_usage (user_id, day, cpu) VALUES ($1, $2, $3)
				ON CONFLICT (user_id, day) DO UPDATE SET cpu = cpu_usage.cpu + excluded.cpu`, f.UserID, f.Day, int64(f.CPU)); err != nil {
				return fmt.Errorf("add cpu usage: %w", err)
			}
		}
		if a == nil {
			return nil
		}
		_, err := s.exec(ctx, tx, `INSERT INTO audit_log (`+auditCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			a.ID, nanos(a.Time), a.UserID, a.Action, a.SessionID, a.ExecutionID, a.CodeHash, a.Outcome, string(a.Detail), a.Actor)
		return s.conflict(err, "append audit")
	})
}
