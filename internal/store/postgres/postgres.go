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

// Open connects to the database named by dsn (a postgres:// URL or
// key=value string) and applies the migrations.
func Open(ctx context.Context, dsn string) (*store.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
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
