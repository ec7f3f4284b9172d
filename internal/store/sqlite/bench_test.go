package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// BenchmarkCellStore is the store's part of a warm cell through HTTP:
// the key's lookup, the execution's row and its finish with the CPU time
// and the audit row.
//
//	go test -run XXX -bench CellStore -count 6 ./internal/store/sqlite/
func BenchmarkCellStore(b *testing.B) {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "kiln.db"))
	defer s.Close()
	u := store.User{Name: "alice"}
	if err := s.CreateUser(ctx, &u); err != nil {
		b.Fatal(err)
	}
	hash := store.HashKey("kiln_bench")
	if err := s.CreateAPIKey(ctx, &store.APIKey{UserID: u.ID, Name: "bench", Prefix: "kiln_", Hash: hash}); err != nil {
		b.Fatal(err)
	}
	ss := store.Session{UserID: u.ID}
	if err := s.CreateSession(ctx, &ss); err != nil {
		b.Fatal(err)
	}
	res := kiln.CellResult{Language: "python", Status: kiln.StatusOK}
	for b.Loop() {
		if _, err := s.APIKeyByHash(ctx, hash); err != nil {
			b.Fatal(err)
		}
		e := store.Execution{SessionID: ss.ID, UserID: u.ID, Actor: u.ID, Language: "python", Code: "1+1"}
		if err := s.CreateExecution(ctx, &e); err != nil {
			b.Fatal(err)
		}
		a := store.AuditEntry{UserID: u.ID, Actor: u.ID, Action: "execution", SessionID: ss.ID, ExecutionID: e.ID, CodeHash: e.CodeHash, Outcome: "ok"}
		if err := s.FinishCell(ctx, store.CellFinish{UserID: u.ID, ID: e.ID, Result: res, Day: "2026-11-24", CPU: 1000, Audit: &a}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAPIKeyByHash is the key's lookup alone, which every request
// with a key makes.
func BenchmarkAPIKeyByHash(b *testing.B) {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "kiln.db"))
	defer s.Close()
	u := store.User{Name: "alice"}
	if err := s.CreateUser(ctx, &u); err != nil {
		b.Fatal(err)
	}
	hash := store.HashKey("kiln_bench")
	if err := s.CreateAPIKey(ctx, &store.APIKey{UserID: u.ID, Name: "bench", Prefix: "kiln_", Hash: hash}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.APIKeyByHash(ctx, hash); err != nil {
			b.Fatal(err)
		}
	}
}
