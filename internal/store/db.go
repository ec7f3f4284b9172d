package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Dialect is what an adapter tells DB about its database.
type Dialect struct {
	// Name picks migration variants: NNNN_name.<Name>.sql wins over
	// NNNN_name.sql. "sqlite" or "postgres".
	Name string
	// LockMigrations is run first in the migration transaction so that two
	// processes starting at once apply migrations one after the other; empty
	// when beginning a transaction already takes a write lock (SQLite with
	// BEGIN IMMEDIATE).
	LockMigrations string
	// IsConflict reports whether err is a unique or primary key violation.
	IsConflict func(error) bool
	// CacheStatements keeps the hot path's statements prepared (see
	// DB.stmt). SQLite wants it: its driver parses and plans every
	// statement anew, a sixth of a warm cell's server CPU. pgx caches
	// statements per connection already.
	CacheStatements bool
}

// DB implements Store over database/sql.
type DB struct {
	db *sql.DB
	d  Dialect
	// stmts holds the prepared hot statements by their text (a
	// *sql.Stmt each), when the dialect caches statements.
	stmts sync.Map
}

var _ Store = (*DB)(nil)

// New migrates db and returns a Store over it. The caller gives up db: Close
// closes it.
func New(ctx context.Context, db *sql.DB, d Dialect) (*DB, error) {
	s := &DB{db: db, d: d}
	if err := s.Migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// SQL returns the underlying handle, for tests and maintenance.
func (s *DB) SQL() *sql.DB { return s.db }

func (s *DB) Close() error {
	s.stmts.Range(func(q, st any) bool {
		st.(*sql.Stmt).Close()
		s.stmts.Delete(q)
		return true
	})
	return s.db.Close()
}

// stmt returns q prepared, once for the store and by database/sql once on
// each connection that runs it, or nil when the dialect does not cache
// statements. Only the hot path's fixed statements go through it, so the
// cache stays small.
func (s *DB) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if !s.d.CacheStatements {
		return nil, nil
	}
	if st, ok := s.stmts.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if old, loaded := s.stmts.LoadOrStore(q, st); loaded {
		st.Close() // another caller prepared it first
		return old.(*sql.Stmt), nil
	}
	return st, nil
}

// exec runs q in tx (or outside any when tx is nil), prepared once when
// the dialect caches statements.
func (s *DB) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	st, err := s.stmt(ctx, q)
	switch {
	case err != nil:
		return nil, err
	case st == nil && tx == nil:
		return s.db.ExecContext(ctx, q, args...)
	case st == nil:
		return tx.ExecContext(ctx, q, args...)
	case tx != nil:
		// The statement already prepared on tx's connection is reused;
		// this handle is closed with tx.
		st = tx.StmtContext(ctx, st)
	}
	return st.ExecContext(ctx, args...)
}

// queryRow is exec for a statement that returns one row.
func (s *DB) queryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) scanner {
	st, err := s.stmt(ctx, q)
	switch {
	case err != nil:
		return errRow{err}
	case st == nil && tx == nil:
		return s.db.QueryRowContext(ctx, q, args...)
	case st == nil:
		return tx.QueryRowContext(ctx, q, args...)
	case tx != nil:
		st = tx.StmtContext(ctx, st)
	}
	return st.QueryRowContext(ctx, args...)
}

// errRow is a row whose statement could not be prepared.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// tx runs fn in a transaction, committing if it returns nil.
func (s *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// conflict turns a unique violation into ErrConflict.
func (s *DB) conflict(err error, what string) error {
	if err == nil {
		return nil
	}
	if s.d.IsConflict != nil && s.d.IsConflict(err) {
		return fmt.Errorf("%s: %w", what, ErrConflict)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// one maps sql.ErrNoRows to ErrNotFound.
func one(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// affected returns ErrNotFound when res changed no row.
func affected(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func now() time.Time { return time.Now().UTC() }

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// cursor is the position after the last row of a page: a time (or
// sequence number) and an id to break ties.
type cursor struct {
	N  int64  `json:"n"`
	ID string `json:"id,omitempty"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, bool, error) {
	if s == "" {
		return cursor{}, false, nil
	}
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return cursor{}, false, kiln.Errorf(kiln.Invalid, "invalid page cursor")
	}
	return c, true, nil
}

func limit(p Page) int {
	switch {
	case p.Limit <= 0:
		return DefaultLimit
	case p.Limit > MaxLimit:
		return MaxLimit
	}
	return p.Limit
}

// query builds a statement with numbered placeholders.
type query struct {
	sql  string
	args []any
}

// arg appends v and returns its placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return fmt.Sprintf("$%d", len(q.args))
}

// page adds the keyset condition and order for (col, id) and fetches one
// row more than the limit, to know whether there is a next page.
func (q *query) page(p Page, col, id string, desc bool) (int, error) {
	c, ok, err := decodeCursor(p.Cursor)
	if err != nil {
		return 0, err
	}
	cmp, dir := ">", "ASC"
	if desc {
		cmp, dir = "<", "DESC"
	}
	if ok {
		n := q.arg(c.N)
		if id == "" {
			q.sql += fmt.Sprintf(" AND %s %s %s", col, cmp, n)
		} else {
			q.sql += fmt.Sprintf(" AND (%s %s %s OR (%s = %s AND %s %s %s))", col, cmp, n, col, n, id, cmp, q.arg(c.ID))
		}
	}
	n := limit(p)
	q.sql += fmt.Sprintf(" ORDER BY %s %s", col, dir)
	if id != "" {
		q.sql += fmt.Sprintf(", %s %s", id, dir)
	}
	q.sql += " LIMIT " + q.arg(n+1)
	return n, nil
}

// trim cuts rows to n and returns the cursor after the last one kept.
func trim[T any](rows []T, n int, pos func(T) cursor) ([]T, string) {
	if len(rows) <= n {
		return rows, ""
	}
	rows = rows[:n]
	return rows, pos(rows[n-1]).encode()
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(...any) error }

func list[T any](ctx context.Context, db *sql.DB, q query, scan func(scanner) (T, error)) ([]T, error) {
	rows, err := db.QueryContext(ctx, q.sql, q.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
