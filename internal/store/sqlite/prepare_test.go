package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// counting is modernc.org/sqlite's driver with the statements SQLite
// parses counted.
var counting = &countingDriver{Driver: &sqlite.Driver{}}

func init() { sql.Register("sqlite-counting", counting) }

type countingDriver struct {
	driver.Driver
	conns, prepares atomic.Int64
}

func (d *countingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	d.conns.Add(1)
	return countingConn{c, d}, nil
}

// countingConn offers database/sql only driver.Conn's methods, so every
// statement it runs, an Exec or Query with a SQL string included, goes
// through Prepare.
type countingConn struct {
	driver.Conn
	d *countingDriver
}

func (c countingConn) Prepare(q string) (driver.Stmt, error) {
	c.d.prepares.Add(1)
	return c.Conn.Prepare(q)
}

// TestHotStatementsPreparedOnce runs the store's part of 100 warm cells
// as Open configures it (the key's lookup, the execution's sequence number
// and row, its finish with CPU time and audit row): SQLite parses each of
// those six statements once per connection, not once per cell, and the
// cells are all recorded.
func TestHotStatementsPreparedOnce(t *testing.T) {
	ctx := context.Background()
	conns := counting.conns.Load()
	s, err := open(ctx, "sqlite-counting", filepath.Join(t.TempDir(), "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u := store.User{Name: "alice"}
	if err := s.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	hash := store.HashKey("kiln_test")
	if err := s.CreateAPIKey(ctx, &store.APIKey{UserID: u.ID, Name: "k", Prefix: "kiln_", Hash: hash}); err != nil {
		t.Fatal(err)
	}
	ss := store.Session{UserID: u.ID}
	if err := s.CreateSession(ctx, &ss); err != nil {
		t.Fatal(err)
	}

	const cells = 100
	prepares := counting.prepares.Load()
	for range cells {
		if _, err := s.APIKeyByHash(ctx, hash); err != nil {
			t.Fatal(err)
		}
		e := store.Execution{SessionID: ss.ID, UserID: u.ID, Language: "python", Code: "1+1"}
		if err := s.CreateExecution(ctx, &e); err != nil {
			t.Fatal(err)
		}
		a := store.AuditEntry{UserID: u.ID, Action: "execution", SessionID: ss.ID, ExecutionID: e.ID, Outcome: "ok"}
		f := store.CellFinish{UserID: u.ID, ID: e.ID, Result: kiln.CellResult{Status: kiln.StatusOK}, Day: "2026-11-25", CPU: 1, Audit: &a}
		if err := s.FinishCell(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	prepares = counting.prepares.Load() - prepares

	// Every connection the store opened may have run all six.
	if conns = counting.conns.Load() - conns; prepares > 6*conns {
		t.Errorf("SQLite parsed %d statements for %d cells on %d connections, want at most 6 per connection: the hot statements are prepared anew", prepares, cells, conns)
	}
	var n int64
	if err := s.SQL().QueryRow(`SELECT count(*) FROM executions WHERE status = 'ok'`).Scan(&n); err != nil || n != cells {
		t.Errorf("finished executions = %d, %v; want %d", n, err, cells)
	}
}
