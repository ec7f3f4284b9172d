package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/unboxed"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// writeCounter counts the store writes a cell's hot path makes.
type writeCounter struct {
	store.Store
	n atomic.Int64
}

func (w *writeCounter) CreateExecution(ctx context.Context, e *kiln.Execution) error {
	w.n.Add(1)
	return w.Store.CreateExecution(ctx, e)
}

func (w *writeCounter) FinishExecution(ctx context.Context, userID, id string, r kiln.CellResult, at time.Time) error {
	w.n.Add(1)
	return w.Store.FinishExecution(ctx, userID, id, r, at)
}

func (w *writeCounter) FinishCell(ctx context.Context, f store.CellFinish) error {
	w.n.Add(1)
	return w.Store.FinishCell(ctx, f)
}

func (w *writeCounter) AddCPU(ctx context.Context, userID, day string, d time.Duration) error {
	w.n.Add(1)
	return w.Store.AddCPU(ctx, userID, day, d)
}

func (w *writeCounter) AppendAudit(ctx context.Context, e *store.AuditEntry) error {
	w.n.Add(1)
	return w.Store.AppendAudit(ctx, e)
}

// TestWarmCellWritesTwice checks that a warm cell (with enough work for
// its CPU time to show at clock-tick resolution) writes to the store
// twice (the execution when it starts; its result, CPU time and audit row
// in one transaction at the end) and that all of it is recorded.
func TestWarmCellWritesTwice(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wc := &writeCounter{Store: st}
	log := slog.New(slog.DiscardHandler)
	svc, err := New(ctx, Config{DataDir: dir, PoolSize: -1, Workspaces: workspace.Plain}, wc, engine.New(unboxed.New(t.TempDir()), log), log)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	u := kiln.User{Name: "hot"}
	if err := st.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	sess, err := svc.CreateSession(ctx, u, SessionSpec{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.DeleteSession(context.Background(), u, sess.ID)
	cell := kiln.CellRequest{Language: "python", Code: "sum(range(3000000))"}
	if _, err := svc.Exec(ctx, u, sess.ID, cell, ExecEvents{}); err != nil {
		t.Fatal(err)
	}
	before := wc.n.Load()
	e, err := svc.Exec(ctx, u, sess.ID, cell, ExecEvents{})
	if err != nil {
		t.Fatal(err)
	}
	if n := wc.n.Load() - before; n != 2 {
		t.Errorf("a warm cell made %d store writes, want 2", n)
	}
	got, err := st.Execution(ctx, u.ID, e.ID)
	if err != nil || got.Status != string(kiln.StatusOK) || got.Result == nil {
		t.Fatalf("execution in the store: %+v, %v; want it finished ok with its result", got, err)
	}
	audit, _, err := st.ListAudit(ctx, store.AuditFilter{SessionID: sess.ID}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range audit {
		found = found || (a.Action == "execution" && a.ExecutionID == e.ID && a.Outcome == "ok")
	}
	if !found {
		t.Errorf("no audit row for execution %s in %+v", e.ID, audit)
	}
	cpu, err := st.CPU(ctx, u.ID, time.Now().UTC().Format(time.DateOnly))
	if err != nil || cpu <= 0 {
		t.Errorf("cpu usage recorded %v, %v; want the cells' CPU time", cpu, err)
	}
}

// readCounter counts the store reads of authentication.
type readCounter struct {
	store.Store
	n atomic.Int64
}

func (r *readCounter) User(ctx context.Context, id string) (kiln.User, error) {
	r.n.Add(1)
	return r.Store.User(ctx, id)
}

func (r *readCounter) APIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	r.n.Add(1)
	return r.Store.APIKeyByHash(ctx, hash)
}

// TestAuthenticateReadsOnlyTheKey checks that a known key costs one store
// read (the key; its user is cached), and that a revocation made by
// another process on the same database takes effect at the next request.
func TestAuthenticateReadsOnlyTheKey(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rc := &readCounter{Store: st}
	log := slog.New(slog.DiscardHandler)
	eng := engine.New(unboxed.New(t.TempDir()), log)
	svc, err := New(ctx, Config{DataDir: dir, PoolSize: -1, Workspaces: workspace.Plain}, rc, eng, log)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	admin := kiln.User{Name: "root", Admin: true}
	if err := st.CreateUser(ctx, &admin); err != nil {
		t.Fatal(err)
	}
	k, err := svc.CreateKey(ctx, admin, admin.ID, "k", KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Authenticate(ctx, k.Secret()); err != nil {
		t.Fatal(err)
	}
	before := rc.n.Load()
	u, _, err := svc.Authenticate(ctx, k.Secret())
	if err != nil || u.ID != admin.ID {
		t.Fatalf("Authenticate = %+v, %v; want the admin", u, err)
	}
	if n := rc.n.Load() - before; n != 1 {
		t.Errorf("authenticating a known key made %d store reads, want 1", n)
	}
	// Another process: its own store connection and service on the same
	// database file.
	st2, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if err := st2.RevokeAPIKey(ctx, admin.ID, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Authenticate(ctx, k.Secret()); kiln.KindOf(err) != kiln.Unauthenticated {
		t.Errorf("a key revoked by another process still authenticates: %v", err)
	}
}

// TestRunWritesOnce checks that a one-shot run records its CPU time and
// its audit row in one store write.
func TestRunWritesOnce(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wc := &writeCounter{Store: st}
	log := slog.New(slog.DiscardHandler)
	svc, err := New(ctx, Config{DataDir: dir, PoolSize: -1, Workspaces: workspace.Plain}, wc, engine.New(unboxed.New(t.TempDir()), log), log)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	u := kiln.User{Name: "runner"}
	if err := st.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	before := wc.n.Load()
	res, err := svc.Run(ctx, u, RunRequest{Language: "python", Code: "print(sum(range(3000000)))"})
	if err != nil || res.Result.Status != kiln.StatusOK {
		t.Fatalf("Run = %+v, %v", res.Result, err)
	}
	if n := wc.n.Load() - before; n != 1 {
		t.Errorf("a one-shot run made %d store writes, want 1", n)
	}
	audit, _, err := st.ListAudit(ctx, store.AuditFilter{UserID: u.ID}, store.Page{Limit: 100})
	if err != nil || len(audit) != 1 || audit[0].Action != "run" || audit[0].Outcome != "ok" {
		t.Errorf("audit rows %+v, %v; want one run, ok", audit, err)
	}
	if cpu, err := st.CPU(ctx, u.ID, time.Now().UTC().Format(time.DateOnly)); err != nil || cpu <= 0 {
		t.Errorf("cpu usage recorded %v, %v; want the run's CPU time", cpu, err)
	}
}
