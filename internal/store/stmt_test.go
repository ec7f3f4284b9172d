package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestStatementCache runs the warm cell's statements many times, also at
// once from several goroutines: each is prepared once for the store, the
// rows are right, and Close closes the prepared statements.
func TestStatementCache(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "kiln.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, db, Dialect{Name: "sqlite", CacheStatements: true})
	if err != nil {
		t.Fatal(err)
	}
	u := User{Name: "alice"}
	if err := s.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	hash := HashKey("kiln_test")
	if err := s.CreateAPIKey(ctx, &APIKey{UserID: u.ID, Name: "k", Prefix: "kiln_", Hash: hash}); err != nil {
		t.Fatal(err)
	}
	cell := func(sessionID string) (int64, error) {
		if _, err := s.APIKeyByHash(ctx, hash); err != nil {
			return 0, err
		}
		e := Execution{SessionID: sessionID, UserID: u.ID, Language: "python", Code: "1+1"}
		if err := s.CreateExecution(ctx, &e); err != nil {
			return 0, err
		}
		a := AuditEntry{UserID: u.ID, Action: "execution", SessionID: sessionID, ExecutionID: e.ID, Outcome: "ok"}
		err := s.FinishCell(ctx, CellFinish{UserID: u.ID, ID: e.ID, Result: kiln.CellResult{Status: kiln.StatusOK}, Day: "2026-11-24", CPU: 1, Audit: &a})
		return e.Seq, err
	}
	const workers, cells = 6, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		ss := Session{UserID: u.ID}
		if err := s.CreateSession(ctx, &ss); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := 1; i <= cells; i++ {
				seq, err := cell(ss.ID)
				if err == nil && seq != int64(i) {
					err = fmt.Errorf("cell %d of session %s: seq %d", i, ss.ID, seq)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var n int64
	if err := db.QueryRow(`SELECT count(*) FROM executions WHERE status = 'ok'`).Scan(&n); err != nil || n != workers*cells {
		t.Errorf("finished executions = %d, %v; want %d", n, err, workers*cells)
	}

	// The key lookup, the execution's two and the finish's three.
	var prepared []*sql.Stmt
	s.stmts.Range(func(_, st any) bool { prepared = append(prepared, st.(*sql.Stmt)); return true })
	if len(prepared) != 6 {
		t.Errorf("%d statements prepared for %d cells, want 6", len(prepared), workers*cells)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, st := range prepared {
		if _, err := st.Exec(); err == nil {
			t.Error("a prepared statement still runs after Close")
		}
	}
}
