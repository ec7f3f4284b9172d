// Package storetest is the conformance suite every store adapter runs.
package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// Raw is what the suite needs beyond Store to check the database itself;
// *store.DB has it.
type Raw interface {
	SQL() *sql.DB
	Migrate(ctx context.Context) error
	Version(ctx context.Context) (int, error)
}

// Run runs the suite. open returns a new, empty, migrated store for each
// test and arranges for it to be closed.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"Migrations", testMigrations},
		{"Users", testUsers},
		{"APIKeys", testAPIKeys},
		{"Sessions", testSessions},
		{"SessionOwnership", testSessionOwnership},
		{"SessionPaging", testSessionPaging},
		{"SessionFilters", testSessionFilters},
		{"Executions", testExecutions},
		{"ExecutionPaging", testExecutionPaging},
		{"ConcurrentExecutions", testConcurrentExecutions},
		{"Artifacts", testArtifacts},
		{"Audit", testAudit},
		{"AuditAppendOnly", testAuditAppendOnly},
		{"InvalidCursor", testInvalidCursor},
		{"CPUUsage", testCPUUsage},
		{"Batches", testBatches},
		{"RunCache", testRunCache},
		{"Shares", testShares},                     // shares.go
		{"SessionNetwork", testSessionNetwork},     // network.go
		{"SessionMounts", testSessionMounts},       // mounts.go
		{"SessionResources", testSessionResources}, // resources.go
		{"SessionMetadata", testSessionMetadata},   // metadata.go
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

var base = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func at(i int) time.Time { return base.Add(time.Duration(i) * time.Millisecond) }

func raw(t *testing.T, s store.Store) Raw {
	t.Helper()
	r, ok := s.(Raw)
	if !ok {
		t.Fatalf("%T does not give raw access (SQL, Migrate, Version)", s)
	}
	return r
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error = %v, want %v", what, err, want)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func newUser(t *testing.T, s store.Store, name string) store.User {
	t.Helper()
	u := store.User{Name: name}
	must(t, "create user "+name, s.CreateUser(context.Background(), &u))
	return u
}

func newSession(t *testing.T, s store.Store, userID string, created time.Time, meta map[string]string) store.Session {
	t.Helper()
	ss := store.Session{UserID: userID, Languages: []string{"python"}, Created: created, Metadata: meta, IdleTTL: time.Hour}
	must(t, "create session", s.CreateSession(context.Background(), &ss))
	return ss
}

func testMigrations(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := raw(t, s)
	for i := range 2 {
		must(t, fmt.Sprintf("migrate again (%d)", i+1), r.Migrate(ctx))
	}
	v, err := r.Version(ctx)
	must(t, "version", err)
	if want := store.LatestVersion(); v != want || want < 2 {
		t.Errorf("schema version = %d, want %d (and at least 2)", v, want)
	}
	var n int
	must(t, "count migrations", r.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n))
	if n != v {
		t.Errorf("schema_migrations has %d rows, want %d: a migration was applied twice or skipped", n, v)
	}
	// The data survives re-running migrations.
	u := newUser(t, s, "after-migrate")
	must(t, "migrate", r.Migrate(ctx))
	if _, err := s.User(ctx, u.ID); err != nil {
		t.Errorf("user after migrate: %v", err)
	}
}

func testUsers(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := store.User{Name: "alice", Admin: true, Created: base}
	must(t, "create", s.CreateUser(ctx, &a))
	if len(a.ID) != 32 {
		t.Errorf("id = %q, want 32 hex characters", a.ID)
	}
	got, err := s.User(ctx, a.ID)
	must(t, "get", err)
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("User (-want +got):\n%s", diff)
	}
	got, err = s.UserByName(ctx, "alice")
	must(t, "get by name", err)
	if got.ID != a.ID || !got.Admin {
		t.Errorf("UserByName = %+v, want %+v", got, a)
	}
	wantErr(t, "duplicate name", s.CreateUser(ctx, &store.User{Name: "alice"}), store.ErrConflict)
	_, err = s.User(ctx, "nope")
	wantErr(t, "missing user", err, store.ErrNotFound)
	_, err = s.UserByName(ctx, "nope")
	wantErr(t, "missing name", err, store.ErrNotFound)
	if kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("kind of ErrNotFound = %v, want not_found", kiln.KindOf(err))
	}

	var names []string
	for i := range 4 {
		u := store.User{Name: fmt.Sprintf("u%d", i), Created: at(i + 1)}
		must(t, "create", s.CreateUser(ctx, &u))
	}
	p := store.Page{Limit: 2}
	for {
		us, next, err := s.ListUsers(ctx, p)
		must(t, "list users", err)
		for _, u := range us {
			names = append(names, u.Name)
		}
		if next == "" {
			break
		}
		p.Cursor = next
	}
	if want := []string{"alice", "u0", "u1", "u2", "u3"}; !slices.Equal(names, want) {
		t.Errorf("users = %v, want %v", names, want)
	}
}

func testAPIKeys(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b := newUser(t, s, "a"), newUser(t, s, "b")
	const secret = "kiln_0123456789abcdef"
	k := store.APIKey{UserID: a.ID, Name: "laptop", Prefix: secret[:9], Hash: store.HashKey(secret), Created: base}
	must(t, "create key", s.CreateAPIKey(ctx, &k))

	got, err := s.APIKeyByHash(ctx, store.HashKey(secret))
	must(t, "by hash", err)
	if diff := cmp.Diff(k, got); diff != "" {
		t.Errorf("APIKeyByHash (-want +got):\n%s", diff)
	}
	_, err = s.APIKeyByHash(ctx, store.HashKey("kiln_wrong"))
	wantErr(t, "wrong key", err, store.ErrNotFound)

	// Only the hash is stored, never the key.
	var n int
	must(t, "scan", raw(t, s).SQL().QueryRowContext(ctx,
		`SELECT COUNT(*) FROM api_keys WHERE hash = $1 OR name = $1 OR prefix = $1 OR id = $1`, secret).Scan(&n))
	if n != 0 {
		t.Errorf("the key itself is stored in api_keys")
	}

	must(t, "touch", s.TouchAPIKey(ctx, k.ID, at(5)))
	got, _ = s.APIKeyByHash(ctx, k.Hash)
	if !got.LastUsed.Equal(at(5)) {
		t.Errorf("LastUsed = %v, want %v", got.LastUsed, at(5))
	}

	wantErr(t, "revoke by another user", s.RevokeAPIKey(ctx, b.ID, k.ID, at(6)), store.ErrNotFound)
	must(t, "revoke", s.RevokeAPIKey(ctx, a.ID, k.ID, at(6)))
	_, err = s.APIKeyByHash(ctx, k.Hash)
	wantErr(t, "revoked key", err, store.ErrNotFound)
	wantErr(t, "revoke twice", s.RevokeAPIKey(ctx, a.ID, k.ID, at(7)), store.ErrNotFound)

	ks, err := s.ListAPIKeys(ctx, a.ID)
	must(t, "list", err)
	if len(ks) != 1 || !ks[0].Revoked.Equal(at(6)) {
		t.Errorf("ListAPIKeys = %+v, want the one key revoked at %v", ks, at(6))
	}

	// An expiring key keeps its expiry, and is still found after it: the
	// service tells an expired key from an unknown one.
	const secret2 = "kiln_expiring0123456789"
	k2 := store.APIKey{UserID: b.ID, Name: "ci", Prefix: secret2[:9], Hash: store.HashKey(secret2), Created: at(8), Expires: at(9), Scope: store.ScopeMetrics}
	must(t, "create expiring key", s.CreateAPIKey(ctx, &k2))
	got, err = s.APIKeyByHash(ctx, k2.Hash)
	must(t, "expiring key by hash", err)
	if !got.Expires.Equal(at(9)) || got.Expired(at(8)) || !got.Expired(at(9)) {
		t.Errorf("expiring key: Expires = %v, want %v, expired from then on", got.Expires, at(9))
	}
	if got.Scope != store.ScopeMetrics {
		t.Errorf("scoped key: Scope = %q, want %q", got.Scope, store.ScopeMetrics)
	}
	if ks, _ := s.ListAPIKeys(ctx, b.ID); len(ks) != 1 || !ks[0].Expires.Equal(at(9)) {
		t.Errorf("ListAPIKeys(b) = %+v, want the key expiring at %v", ks, at(9))
	}

	wantErr(t, "same hash twice", s.CreateAPIKey(ctx, &store.APIKey{UserID: b.ID, Hash: k.Hash}), store.ErrConflict)
	wantErr(t, "key for missing user", s.CreateAPIKey(ctx, &store.APIKey{UserID: "nope", Hash: store.HashKey("x")}), store.ErrNotFound)
}

func testSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	ss := store.Session{
		UserID:    a.ID,
		Languages: []string{"python", "r"},
		Limits:    kiln.Limits{Timeout: 5 * time.Second, MemoryBytes: 256 * kiln.MiB},
		Metadata:  map[string]string{"conversation": "c-1", "note": "héllo \"quoted\""},
		IdleTTL:   90 * time.Minute,
		Created:   base,
		SandboxID: "sb-1",
	}
	must(t, "create", s.CreateSession(ctx, &ss))
	if ss.Status != store.SessionActive || !ss.LastActive.Equal(base) {
		t.Errorf("after create: status %q, last active %v; want active, %v", ss.Status, ss.LastActive, base)
	}
	got, err := s.Session(ctx, a.ID, ss.ID)
	must(t, "get", err)
	if diff := cmp.Diff(ss, got); diff != "" {
		t.Errorf("Session (-want +got):\n%s", diff)
	}

	must(t, "touch", s.TouchSession(ctx, a.ID, ss.ID, at(10)))
	must(t, "set sandbox", s.SetSandbox(ctx, a.ID, ss.ID, "sb-2"))
	must(t, "end", s.EndSession(ctx, a.ID, ss.ID, "idle timeout", at(20)))
	got, _ = s.Session(ctx, a.ID, ss.ID)
	want := ss
	want.LastActive, want.SandboxID = at(10), "sb-2"
	want.Status, want.EndReason, want.Ended = store.SessionEnded, "idle timeout", at(20)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Session after end (-want +got):\n%s", diff)
	}
	wantErr(t, "end twice", s.EndSession(ctx, a.ID, ss.ID, "again", at(21)), store.ErrConflict)

	wantErr(t, "session for missing user", s.CreateSession(ctx, &store.Session{UserID: "nope"}), store.ErrNotFound)
	_, err = s.Session(ctx, a.ID, "nope")
	wantErr(t, "missing session", err, store.ErrNotFound)

	live := newSession(t, s, a.ID, at(30), nil)
	act, err := s.ActiveSessions(ctx)
	must(t, "active sessions", err)
	if len(act) != 1 || act[0].ID != live.ID {
		t.Errorf("ActiveSessions = %d sessions, want only %s", len(act), live.ID)
	}
}

func testSessionOwnership(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b := newUser(t, s, "a"), newUser(t, s, "b")
	ss := newSession(t, s, a.ID, base, map[string]string{"k": "v"})
	e := store.Execution{SessionID: ss.ID, UserID: a.ID, Language: "python", Code: "1+1"}
	must(t, "create execution", s.CreateExecution(ctx, &e))
	must(t, "add artifacts", s.AddArtifacts(ctx, a.ID, e.ID, []kiln.Artifact{{Path: "out.png", Size: 10, Change: "created"}}, at(1)))

	_, err := s.Session(ctx, b.ID, ss.ID)
	wantErr(t, "B gets A's session", err, store.ErrNotFound)
	wantErr(t, "B touches A's session", s.TouchSession(ctx, b.ID, ss.ID, at(2)), store.ErrNotFound)
	wantErr(t, "B sets A's sandbox", s.SetSandbox(ctx, b.ID, ss.ID, "x"), store.ErrNotFound)
	wantErr(t, "B ends A's session", s.EndSession(ctx, b.ID, ss.ID, "x", at(2)), store.ErrNotFound)
	wantErr(t, "B runs in A's session", s.CreateExecution(ctx, &store.Execution{SessionID: ss.ID, UserID: b.ID}), store.ErrNotFound)
	_, err = s.Execution(ctx, b.ID, e.ID)
	wantErr(t, "B gets A's execution", err, store.ErrNotFound)
	wantErr(t, "B finishes A's execution", s.FinishExecution(ctx, b.ID, e.ID, kiln.CellResult{Status: kiln.StatusOK}, at(3)), store.ErrNotFound)
	_, _, err = s.ListExecutions(ctx, b.ID, ss.ID, store.Page{})
	wantErr(t, "B lists A's executions", err, store.ErrNotFound)
	wantErr(t, "B adds to A's artifacts", s.AddArtifacts(ctx, b.ID, e.ID, []kiln.Artifact{{Path: "x"}}, at(3)), store.ErrNotFound)
	_, _, err = s.ListArtifacts(ctx, b.ID, ss.ID, "", store.Page{})
	wantErr(t, "B lists A's artifacts", err, store.ErrNotFound)
	_, _, err = s.ListArtifacts(ctx, b.ID, ss.ID, e.ID, store.Page{})
	wantErr(t, "B lists A's execution's artifacts", err, store.ErrNotFound)
	if got, _, err := s.ListSessions(ctx, b.ID, store.SessionFilter{}, store.Page{}); err != nil || len(got) != 0 {
		t.Errorf("B lists sessions = %d, %v; want none", len(got), err)
	}
	if got, _, err := s.ListSessions(ctx, b.ID, store.SessionFilter{Metadata: map[string]string{"k": "v"}}, store.Page{}); err != nil || len(got) != 0 {
		t.Errorf("B lists sessions by A's metadata = %d, %v; want none", len(got), err)
	}

	// A still sees everything, unchanged.
	got, err := s.Session(ctx, a.ID, ss.ID)
	must(t, "A gets session", err)
	if got.Status != store.SessionActive || got.SandboxID != "" {
		t.Errorf("A's session was changed by B: %+v", got)
	}
	if arts, _, err := s.ListArtifacts(ctx, a.ID, ss.ID, "", store.Page{}); err != nil || len(arts) != 1 {
		t.Errorf("A lists artifacts = %d, %v; want 1", len(arts), err)
	}
}

// drain pages through a listing, adding rows between pages with grow.
func drain[T any](t *testing.T, list func(store.Page) ([]T, string, error), limit int, grow func(page int)) []T {
	t.Helper()
	var all []T
	p := store.Page{Limit: limit}
	for page := 0; ; page++ {
		got, next, err := list(p)
		must(t, "list", err)
		if len(got) > limit {
			t.Fatalf("page %d has %d rows, limit %d", page, len(got), limit)
		}
		all = append(all, got...)
		if next == "" {
			return all
		}
		if page > 1000 {
			t.Fatal("paging does not end")
		}
		if grow != nil {
			grow(page)
		}
		p.Cursor = next
	}
}

func testSessionPaging(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	var want []string
	for i := range 25 {
		// Pairs share a creation time, so the id breaks ties.
		want = append(want, newSession(t, s, a.ID, at(i/2), nil).ID)
	}
	added := 0
	got := drain(t, func(p store.Page) ([]store.Session, string, error) {
		return s.ListSessions(ctx, a.ID, store.SessionFilter{}, p)
	}, 4, func(int) {
		// Newer sessions arrive while the client pages.
		newSession(t, s, a.ID, at(100+added), nil)
		added++
	})
	seen := map[string]int{}
	for i, ss := range got {
		seen[ss.ID]++
		if i > 0 {
			prev := got[i-1]
			if prev.Created.Before(ss.Created) || (prev.Created.Equal(ss.Created) && prev.ID < ss.ID) {
				t.Errorf("sessions not newest first at %d", i)
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("session %s listed %d times", id, n)
		}
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("session %s listed %d times, want once", id, seen[id])
		}
	}
	all, _, err := s.ListSessions(ctx, a.ID, store.SessionFilter{}, store.Page{Limit: store.MaxLimit})
	must(t, "list all", err)
	if len(all) != 25+added {
		t.Errorf("%d sessions in one page, want %d", len(all), 25+added)
	}
}

func testSessionFilters(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	s1 := newSession(t, s, a.ID, at(1), map[string]string{"conversation": "c1", "team": "x"})
	s2 := newSession(t, s, a.ID, at(2), map[string]string{"conversation": "c2", "team": "x"})
	s3 := newSession(t, s, a.ID, at(3), map[string]string{"conversation": "c1", "team": "y"})
	s4 := newSession(t, s, a.ID, at(4), nil)
	must(t, "end", s.EndSession(ctx, a.ID, s2.ID, "done", at(5)))

	for _, tc := range []struct {
		name string
		f    store.SessionFilter
		want []string
	}{
		{"all", store.SessionFilter{}, []string{s4.ID, s3.ID, s2.ID, s1.ID}},
		{"active", store.SessionFilter{Status: store.SessionActive}, []string{s4.ID, s3.ID, s1.ID}},
		{"ended", store.SessionFilter{Status: store.SessionEnded}, []string{s2.ID}},
		{"one pair", store.SessionFilter{Metadata: map[string]string{"conversation": "c1"}}, []string{s3.ID, s1.ID}},
		{"two pairs", store.SessionFilter{Metadata: map[string]string{"conversation": "c1", "team": "x"}}, []string{s1.ID}},
		{"pair and status", store.SessionFilter{Status: store.SessionEnded, Metadata: map[string]string{"team": "x"}}, []string{s2.ID}},
		{"no match", store.SessionFilter{Metadata: map[string]string{"conversation": "c9"}}, nil},
		{"key is not value", store.SessionFilter{Metadata: map[string]string{"c1": "conversation"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := drain(t, func(p store.Page) ([]store.Session, string, error) {
				return s.ListSessions(ctx, a.ID, tc.f, p)
			}, 1, nil)
			var ids []string
			for _, ss := range got {
				ids = append(ids, ss.ID)
			}
			if diff := cmp.Diff(tc.want, ids); diff != "" {
				t.Errorf("ListSessions (-want +got):\n%s", diff)
			}
		})
	}
}

func testExecutions(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	ss := newSession(t, s, a.ID, base, nil)
	other := newSession(t, s, a.ID, base, nil)

	e := store.Execution{SessionID: ss.ID, UserID: a.ID, Language: "python", Code: "print(1)", Started: at(10)}
	must(t, "create", s.CreateExecution(ctx, &e))
	if e.Seq != 1 || e.Status != store.ExecRunning || e.CodeHash != store.HashCode("print(1)") {
		t.Errorf("created %+v, want seq 1, running, code hash", e)
	}
	if got, _ := s.Session(ctx, a.ID, ss.ID); !got.LastActive.Equal(at(10)) {
		t.Errorf("session last active = %v, want %v (the execution's start)", got.LastActive, at(10))
	}
	got, err := s.Execution(ctx, a.ID, e.ID)
	must(t, "get", err)
	if diff := cmp.Diff(e, got); diff != "" {
		t.Errorf("Execution (-want +got):\n%s", diff)
	}

	code := 1
	result := kiln.CellResult{
		Language: "python", Status: kiln.StatusError, Stdout: "1\n", Stderr: "boom",
		Outputs:   []kiln.Output{{Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"2"`)}, Result: true}},
		Error:     &kiln.CellError{Name: "ValueError", Message: "bad", Traceback: []string{"line 1"}, Line: 1},
		ExitCode:  &code,
		Usage:     kiln.Usage{Wall: 1500 * time.Millisecond, CPU: time.Second, PeakMemory: 1 << 20, OutputBytes: 6},
		Artifacts: []kiln.Artifact{{Path: "a.txt", Size: 3, Change: "created"}},
		Notice:    "note",
	}
	must(t, "finish", s.FinishExecution(ctx, a.ID, e.ID, result, at(20)))
	got, _ = s.Execution(ctx, a.ID, e.ID)
	want := e
	want.Status, want.Result, want.Ended = string(kiln.StatusError), &result, at(20)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Execution after finish (-want +got):\n%s", diff)
	}

	e2 := store.Execution{SessionID: ss.ID, UserID: a.ID, Language: "python", Code: "2"}
	must(t, "create second", s.CreateExecution(ctx, &e2))
	o1 := store.Execution{SessionID: other.ID, UserID: a.ID, Language: "python", Code: "3"}
	must(t, "create in other session", s.CreateExecution(ctx, &o1))
	if e2.Seq != 2 || o1.Seq != 1 {
		t.Errorf("seqs = %d, %d; want 2 in the first session and 1 in the other", e2.Seq, o1.Seq)
	}
	wantErr(t, "missing session", s.CreateExecution(ctx, &store.Execution{SessionID: "nope", UserID: a.ID}), store.ErrNotFound)
	_, err = s.Execution(ctx, a.ID, "nope")
	wantErr(t, "missing execution", err, store.ErrNotFound)
	_, _, err = s.ListExecutions(ctx, a.ID, "nope", store.Page{})
	wantErr(t, "list missing session", err, store.ErrNotFound)
}

func testExecutionPaging(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	ss := newSession(t, s, a.ID, base, nil)
	run := func() {
		e := store.Execution{SessionID: ss.ID, UserID: a.ID, Language: "python", Code: "x"}
		must(t, "create", s.CreateExecution(ctx, &e))
	}
	for range 17 {
		run()
	}
	got := drain(t, func(p store.Page) ([]store.Execution, string, error) {
		return s.ListExecutions(ctx, a.ID, ss.ID, p)
	}, 5, func(page int) {
		if page < 3 {
			run() // cells keep running while the history is read
		}
	})
	var seqs []int64
	for _, e := range got {
		seqs = append(seqs, e.Seq)
	}
	var want []int64
	for i := range 20 {
		want = append(want, int64(i+1))
	}
	if diff := cmp.Diff(want, seqs); diff != "" {
		t.Errorf("sequence numbers over pages (-want +got):\n%s", diff)
	}
}

func testConcurrentExecutions(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	ss := newSession(t, s, a.ID, base, nil)
	const n = 20
	seqs := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			e := store.Execution{SessionID: ss.ID, UserID: a.ID, Language: "python", Code: fmt.Sprint(i)}
			errs[i] = s.CreateExecution(ctx, &e)
			seqs[i] = e.Seq
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		must(t, fmt.Sprintf("goroutine %d", i), err)
	}
	slices.Sort(seqs)
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("sequence numbers %v, want 1..%d each once", seqs, n)
		}
	}
	es, _, err := s.ListExecutions(ctx, a.ID, ss.ID, store.Page{Limit: 100})
	must(t, "list", err)
	if len(es) != n {
		t.Errorf("%d executions stored, want %d", len(es), n)
	}
}

func testArtifacts(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	ss := newSession(t, s, a.ID, base, nil)
	e1 := store.Execution{SessionID: ss.ID, UserID: a.ID, Language: "python", Code: "1"}
	e2 := store.Execution{SessionID: ss.ID, UserID: a.ID, Language: "python", Code: "2"}
	must(t, "create", s.CreateExecution(ctx, &e1))
	must(t, "create", s.CreateExecution(ctx, &e2))
	must(t, "add", s.AddArtifacts(ctx, a.ID, e1.ID, []kiln.Artifact{
		{Path: "plot.png", Size: 2048, Change: "created"},
		{Path: "data/out.csv", Size: 10, Change: "modified"},
	}, at(1)))
	must(t, "add", s.AddArtifacts(ctx, a.ID, e2.ID, []kiln.Artifact{{Path: "plot.png", Change: "deleted"}}, at(2)))

	all := drain(t, func(p store.Page) ([]store.Artifact, string, error) {
		return s.ListArtifacts(ctx, a.ID, ss.ID, "", p)
	}, 2, nil)
	if len(all) != 3 || all[2].Path != "plot.png" || all[2].Change != "deleted" || all[2].ExecutionID != e2.ID {
		t.Fatalf("ListArtifacts = %+v, want 3 with the deletion last", all)
	}
	first := all[0]
	if first.SessionID != ss.ID || first.UserID != a.ID || !first.Created.Equal(at(1)) {
		t.Errorf("artifact = %+v", first)
	}
	one, _, err := s.ListArtifacts(ctx, a.ID, ss.ID, e1.ID, store.Page{})
	must(t, "list by execution", err)
	var paths []string
	for _, a := range one {
		paths = append(paths, fmt.Sprintf("%s %d %s", a.Path, a.Size, a.Change))
	}
	slices.Sort(paths)
	if want := []string{"data/out.csv 10 modified", "plot.png 2048 created"}; !slices.Equal(paths, want) {
		t.Errorf("artifacts of execution 1 = %v, want %v", paths, want)
	}
	other := newSession(t, s, a.ID, base, nil)
	_, _, err = s.ListArtifacts(ctx, a.ID, other.ID, e1.ID, store.Page{})
	wantErr(t, "execution of another session", err, store.ErrNotFound)
}

func testAudit(t *testing.T, s store.Store) {
	ctx := context.Background()
	entries := []store.AuditEntry{
		{Time: at(1), UserID: "u1", Action: "session.create", SessionID: "s1", Outcome: "ok"},
		{Time: at(2), UserID: "u1", Action: "execution", SessionID: "s1", ExecutionID: "e1", CodeHash: store.HashCode("1+1"), Outcome: "ok",
			Detail: json.RawMessage(`{"language":"python"}`)},
		{Time: at(2), UserID: "u2", Action: "file.write", SessionID: "s2", Outcome: "ok", Detail: json.RawMessage(`{"path":"a"}`)},
		{Time: at(3), UserID: "u1", Action: "egress", SessionID: "s1", Outcome: "denied", Detail: json.RawMessage(`{"host":"example.com"}`)},
	}
	for i := range entries {
		must(t, "append", s.AppendAudit(ctx, &entries[i]))
	}
	if string(entries[0].Detail) != "{}" {
		t.Errorf("empty detail stored as %q, want {}", entries[0].Detail)
	}
	if err := s.AppendAudit(ctx, &store.AuditEntry{Action: "x", Detail: json.RawMessage(`{`)}); err == nil {
		t.Error("append with invalid JSON detail succeeded")
	}
	all := drain(t, func(p store.Page) ([]store.AuditEntry, string, error) {
		return s.ListAudit(ctx, store.AuditFilter{}, p)
	}, 3, nil)
	if len(all) != 4 || all[0].ID != entries[0].ID || all[3].ID != entries[3].ID {
		t.Fatalf("ListAudit = %+v, want the 4 entries oldest first", all)
	}
	byID := map[string]store.AuditEntry{}
	for _, e := range all {
		byID[e.ID] = e
	}
	for _, want := range entries {
		if diff := cmp.Diff(want, byID[want.ID]); diff != "" {
			t.Errorf("audit entry (-want +got):\n%s", diff)
		}
	}
	u1, _, err := s.ListAudit(ctx, store.AuditFilter{UserID: "u1", SessionID: "s1"}, store.Page{})
	must(t, "filter", err)
	if len(u1) != 3 {
		t.Errorf("u1/s1 audit = %d entries, want 3", len(u1))
	}
}

func testAuditAppendOnly(t *testing.T, s store.Store) {
	ctx := context.Background()
	e := store.AuditEntry{UserID: "u1", Action: "execution", Outcome: "ok"}
	must(t, "append", s.AppendAudit(ctx, &e))
	db := raw(t, s).SQL()
	for _, stmt := range []string{
		`UPDATE audit_log SET outcome = 'forged' WHERE id = $1`,
		`UPDATE audit_log SET outcome = 'forged'`,
		`DELETE FROM audit_log WHERE id = $1`,
		`DELETE FROM audit_log`,
	} {
		var args []any
		if n := len(stmt); stmt[n-2:] == "$1" {
			args = []any{e.ID}
		}
		if _, err := db.ExecContext(ctx, stmt, args...); err == nil {
			t.Errorf("%s: succeeded, want the database to refuse it", stmt)
		}
	}
	got, _, err := s.ListAudit(ctx, store.AuditFilter{}, store.Page{})
	must(t, "list", err)
	if len(got) != 1 || got[0].Outcome != "ok" {
		t.Errorf("audit log after tampering = %+v, want the one entry unchanged", got)
	}
}

func testInvalidCursor(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	for _, c := range []string{"not base64!", "bm90IGpzb24"} {
		_, _, err := s.ListSessions(ctx, a.ID, store.SessionFilter{}, store.Page{Cursor: c})
		if kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("cursor %q: error %v, want kind invalid", c, err)
		}
	}
}

// ConcurrentStart opens one new, empty database from several handles at
// once, as processes or replicas starting together would, and checks that
// each migration was applied exactly once.
func ConcurrentStart(t *testing.T, open func(context.Context) (*store.DB, error)) {
	t.Helper()
	const n = 5
	stores := make([]*store.DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = open(context.Background()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var rows int
	if err := stores[0].SQL().QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != store.LatestVersion() {
		t.Errorf("schema_migrations has %d rows, want %d", rows, store.LatestVersion())
	}
}

func testCPUUsage(t *testing.T, s store.Store) {
	ctx := context.Background()
	u := store.User{Name: "cpu"}
	must(t, "create user", s.CreateUser(ctx, &u))
	got, err := s.CPU(ctx, u.ID, "2026-03-01")
	must(t, "cpu before any", err)
	if got != 0 {
		t.Errorf("cpu before any = %v, want 0", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.AddCPU(ctx, u.ID, "2026-03-01", 250*time.Millisecond); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	must(t, "another day", s.AddCPU(ctx, u.ID, "2026-03-02", time.Second))
	got, err = s.CPU(ctx, u.ID, "2026-03-01")
	must(t, "cpu", err)
	if got != 2*time.Second {
		t.Errorf("cpu after 8 concurrent adds of 250ms = %v, want 2s", got)
	}
	if got, _ := s.CPU(ctx, u.ID, "2026-03-02"); got != time.Second {
		t.Errorf("the next day's cpu = %v, want 1s", got)
	}
}
