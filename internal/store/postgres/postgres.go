// Package postgres opens kiln's store in PostgreSQL through pgx's
// database/sql driver, for several replicas sharing one database.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/kiln-dev/kiln/internal/store"
)

// migrationLock is the key of the transaction-scoped advisory lock that
// makes replicas starting together apply migrations one at a time.
const migrationLock = 0x6b696c6e // "kiln"

// Dialect describes PostgreSQL to store.DB.
var Dialect = store.Dialect{
	Name:           "postgres",
	LockMigrations: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", migrationLock),
	IsConflict: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23505" // unique_violation
	},
}

// maxIdleConns bounds the idle connections one kiln keeps open.
const maxIdleConns = 32

// Open connects to the database named by dsn (a postgres:// URL or
// key=value string) and applies the migrations.
func Open(ctx context.Context, dsn string) (*store.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// database/sql keeps 2 idle connections by default: with 8 requests at
	// once, a replica opened (and closed) a PostgreSQL connection for about
	// one request in four, and PostgreSQL's share of the CPU tripled
	// (test/replicabench). Keep as many as a busy replica uses at once.
	db.SetMaxIdleConns(maxIdleConns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s, err := store.New(ctx, db, Dialect)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return s, nil
}
