// Package sqlite opens kiln's store in a SQLite file with the pure-Go
// modernc.org/sqlite driver (no cgo, so the binary stays static).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/kiln-dev/kiln/internal/store"
)

// Dialect describes SQLite to store.DB. Every transaction begins IMMEDIATE
// (see Open), so migrations need no extra lock.
var Dialect = store.Dialect{
	Name:            "sqlite",
	CacheStatements: true,
	IsConflict: func(err error) bool {
		var e *sqlite.Error
		if !errors.As(err, &e) {
			return false
		}
		return e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	},
}

// Open opens (creating if needed) the database file at path and applies the
// migrations. The file is in WAL mode, with foreign keys enforced and a busy
// timeout, and every transaction takes the write lock when it begins, so
// concurrent writers, in this process or another, wait instead of failing.
func Open(ctx context.Context, path string) (*store.DB, error) {
	return open(ctx, "sqlite", path)
}

// open is Open through the database/sql driver registered as driverName,
// modernc.org/sqlite's own or, in tests, one wrapped around it.
func open(ctx context.Context, driverName, path string) (*store.DB, error) {
	// The file holds key hashes and users' code: readable by kiln alone.
	// SQLite gives the -wal and -shm files the same permissions.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	f.Close()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open(driverName, "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := firstConnection(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	s, err := store.New(ctx, db, Dialect)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return s, nil
}

// firstConnection connects once, waiting out SQLITE_BUSY. While another
// process turns a new file into WAL mode, SQLite answers BUSY at once
// instead of calling the busy handler, so two kiln processes starting on
// a new data directory would otherwise race.
func firstConnection(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := db.PingContext(ctx)
		if !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}
