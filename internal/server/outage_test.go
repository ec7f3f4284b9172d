package server_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// flakyStore is a real store whose every call fails, as a database that
// went away does, while down is set.
type flakyStore struct {
	store.Store
	down atomic.Bool
	// keysUp keeps finding keys and users during the outage, so that the
	// failure comes after authentication, in the handler.
	keysUp atomic.Bool
}

// errDown is what a driver says when the database is gone.
var errDown = &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}

func (f *flakyStore) fail(what string) error {
	if f.keysUp.Load() && (what == "get key" || what == "get user" || what == "touch key") {
		return nil
	}
	if f.down.Load() {
		return errors.Join(errors.New(what), errDown)
	}
	return nil
}

func (f *flakyStore) CreateUser(ctx context.Context, u *kiln.User) error {
	if err := f.fail("create user"); err != nil {
		return err
	}
	return f.Store.CreateUser(ctx, u)
}

func (f *flakyStore) User(ctx context.Context, id string) (kiln.User, error) {
	if err := f.fail("get user"); err != nil {
		return kiln.User{}, err
	}
	return f.Store.User(ctx, id)
}

func (f *flakyStore) UserByName(ctx context.Context, name string) (kiln.User, error) {
	if err := f.fail("get user"); err != nil {
		return kiln.User{}, err
	}
	return f.Store.UserByName(ctx, name)
}

func (f *flakyStore) ListUsers(ctx context.Context, p store.Page) ([]kiln.User, string, error) {
	if err := f.fail("list users"); err != nil {
		return nil, "", err
	}
	return f.Store.ListUsers(ctx, p)
}

func (f *flakyStore) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	if err := f.fail("create key"); err != nil {
		return err
	}
	return f.Store.CreateAPIKey(ctx, k)
}

func (f *flakyStore) APIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	if err := f.fail("get key"); err != nil {
		return store.APIKey{}, err
	}
	return f.Store.APIKeyByHash(ctx, hash)
}

func (f *flakyStore) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	if err := f.fail("touch key"); err != nil {
		return err
	}
	return f.Store.TouchAPIKey(ctx, id, at)
}

func (f *flakyStore) RevokeAPIKey(ctx context.Context, userID, id string, at time.Time) error {
	if err := f.fail("revoke key"); err != nil {
		return err
	}
	return f.Store.RevokeAPIKey(ctx, userID, id, at)
}

func (f *flakyStore) ListAPIKeys(ctx context.Context, userID string) ([]store.APIKey, error) {
	if err := f.fail("list keys"); err != nil {
		return nil, err
	}
	return f.Store.ListAPIKeys(ctx, userID)
}

func (f *flakyStore) CreateSession(ctx context.Context, s *kiln.Session) error {
	if err := f.fail("create session"); err != nil {
		return err
	}
	return f.Store.CreateSession(ctx, s)
}

func (f *flakyStore) Session(ctx context.Context, userID, id string) (kiln.Session, error) {
	if err := f.fail("get session"); err != nil {
		return kiln.Session{}, err
	}
	return f.Store.Session(ctx, userID, id)
}

func (f *flakyStore) ListSessions(ctx context.Context, userID string, sf store.SessionFilter, p store.Page) ([]kiln.Session, string, error) {
	if err := f.fail("list sessions"); err != nil {
		return nil, "", err
	}
	return f.Store.ListSessions(ctx, userID, sf, p)
}

func (f *flakyStore) TouchSession(ctx context.Context, userID, id string, at time.Time) error {
	if err := f.fail("touch session"); err != nil {
		return err
	}
	return f.Store.TouchSession(ctx, userID, id, at)
}

func (f *flakyStore) SetSandbox(ctx context.Context, userID, id, sandboxID string) error {
	if err := f.fail("set sandbox"); err != nil {
		return err
	}
	return f.Store.SetSandbox(ctx, userID, id, sandboxID)
}

func (f *flakyStore) EndSession(ctx context.Context, userID, id, reason string, at time.Time) error {
	if err := f.fail("end session"); err != nil {
		return err
	}
	return f.Store.EndSession(ctx, userID, id, reason, at)
}

func (f *flakyStore) ActiveSessions(ctx context.Context) ([]kiln.Session, error) {
	if err := f.fail("active sessions"); err != nil {
		return nil, err
	}
	return f.Store.ActiveSessions(ctx)
}

func (f *flakyStore) CreateExecution(ctx context.Context, e *kiln.Execution) error {
	if err := f.fail("create execution"); err != nil {
		return err
	}
	return f.Store.CreateExecution(ctx, e)
}

func (f *flakyStore) FinishExecution(ctx context.Context, userID, id string, result kiln.CellResult, at time.Time) error {
	if err := f.fail("finish execution"); err != nil {
		return err
	}
	return f.Store.FinishExecution(ctx, userID, id, result, at)
}

func (f *flakyStore) FinishCell(ctx context.Context, fc store.CellFinish) error {
	if err := f.fail("finish execution"); err != nil {
		return err
	}
	return f.Store.FinishCell(ctx, fc)
}

func (f *flakyStore) Execution(ctx context.Context, userID, id string) (kiln.Execution, error) {
	if err := f.fail("get execution"); err != nil {
		return kiln.Execution{}, err
	}
	return f.Store.Execution(ctx, userID, id)
}

func (f *flakyStore) ListExecutions(ctx context.Context, userID, sessionID string, p store.Page) ([]kiln.Execution, string, error) {
	if err := f.fail("list executions"); err != nil {
		return nil, "", err
	}
	return f.Store.ListExecutions(ctx, userID, sessionID, p)
}

func (f *flakyStore) AddArtifacts(ctx context.Context, userID, executionID string, arts []kiln.Artifact, at time.Time) error {
	if err := f.fail("add artifacts"); err != nil {
		return err
	}
	return f.Store.AddArtifacts(ctx, userID, executionID, arts, at)
}

func (f *flakyStore) ListArtifacts(ctx context.Context, userID, sessionID, executionID string, p store.Page) ([]store.Artifact, string, error) {
	if err := f.fail("list artifacts"); err != nil {
		return nil, "", err
	}
	return f.Store.ListArtifacts(ctx, userID, sessionID, executionID, p)
}

func (f *flakyStore) AppendAudit(ctx context.Context, e *store.AuditEntry) error {
	if err := f.fail("append audit"); err != nil {
		return err
	}
	return f.Store.AppendAudit(ctx, e)
}

func (f *flakyStore) ListAudit(ctx context.Context, af store.AuditFilter, p store.Page) ([]store.AuditEntry, string, error) {
	if err := f.fail("list audit"); err != nil {
		return nil, "", err
	}
	return f.Store.ListAudit(ctx, af, p)
}

// TestStoreOutage: while the database is gone, every request answers 503
// unavailable with Retry-After, never 500 internal; when it is back, the
// same server serves again without a restart, and what was acknowledged
// before the outage is all there.
func TestStoreOutage(t *testing.T) {
	var fs *flakyStore
	e := newEnv(t, options{wrapStore: func(s store.Store) store.Store { fs = &flakyStore{Store: s}; return fs }})
	ctx := ctxT(t)
	c := e.user("alice")
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Exec(ctx, s.ID, client.ExecRequest{Code: "x = 41"})
	if err != nil || x.Status != "ok" {
		t.Fatalf("exec before the outage: %+v, %v", x, err)
	}

	fs.down.Store(true)
	key := e.adminKey(t)
	for _, tc := range []struct {
		keysUp             bool
		method, path, body string
	}{
		{false, "GET", "/v1/sessions", ""},
		{false, "POST", "/v1/sessions/" + s.ID + "/executions", `{"code":"x += 1"}`},
		{false, "GET", "/v1/health/ready", ""},
		{true, "GET", "/v1/sessions", ""},
		{true, "GET", "/v1/sessions/" + s.ID, ""},
		{true, "POST", "/v1/sessions/" + s.ID + "/executions", `{"code":"x += 1"}`},
		{true, "POST", "/v1/sessions", `{}`},
		{true, "GET", "/v1/users", ""},
	} {
		fs.keysUp.Store(tc.keysUp)
		ctype := ""
		if tc.body != "" {
			ctype = "application/json"
		}
		resp, p := raw(t, tc.method, e.url+tc.path, key, ctype, tc.body)
		if resp.StatusCode != http.StatusServiceUnavailable || p.Code != "unavailable" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s during the outage: %d %+v, Retry-After %q; want 503 unavailable with Retry-After",
				tc.method, tc.path, resp.StatusCode, p, resp.Header.Get("Retry-After"))
		}
		if strings.Contains(p.Detail, "connection refused") {
			t.Errorf("%s %s: the detail %q shows the driver's error", tc.method, tc.path, p.Detail)
		}
	}
	fs.keysUp.Store(false)
	_, err = c.Exec(ctx, s.ID, client.ExecRequest{Code: "x += 1"})
	wantProblem(t, "exec during the outage", err, 503, "unavailable")

	fs.down.Store(false)
	x, err = c.Exec(ctx, s.ID, client.ExecRequest{Code: "print(x)"})
	if err != nil || x.Status != "ok" || x.Result == nil || x.Result.Stdout != "41\n" {
		t.Fatalf("exec after the outage: %+v, %v; want 41 (the refused cell did not run)", x, err)
	}
	h, err := c.History(ctx, s.ID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Executions) != 2 || h.Executions[0].Code != "x = 41" || h.Executions[1].Code != "print(x)" {
		t.Errorf("history after the outage = %+v, want the two acknowledged cells", h.Executions)
	}
}

// TestResultSurvivesOutage: a store that fails while a cell runs and is
// back soon after costs the caller time, not the cell's result.
func TestResultSurvivesOutage(t *testing.T) {
	var fs *flakyStore
	e := newEnv(t, options{wrapStore: func(s store.Store) store.Store { fs = &flakyStore{Store: s}; return fs }})
	ctx := ctxT(t)
	c := e.user("carl")
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		x   *client.Execution
		err error
	}
	done := make(chan answer, 1)
	go func() {
		x, err := c.Exec(ctx, s.ID, client.ExecRequest{Code: "import time\ntime.sleep(2)\nprint('ran')"})
		done <- answer{x, err}
	}()
	// The store goes down once the cell is recorded as running, and comes
	// back after the cell has ended.
	for {
		h, err := c.History(ctx, s.ID, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Executions) == 1 && h.Executions[0].Status == "running" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	fs.down.Store(true)
	time.Sleep(4 * time.Second)
	fs.down.Store(false)
	a := <-done
	if a.err != nil || a.x.Status != "ok" || a.x.Result == nil || a.x.Result.Stdout != "ran\n" {
		t.Fatalf("the cell across the outage: %+v, %v; want its result", a.x, a.err)
	}
	x, err := c.Execution(ctx, a.x.ID)
	if err != nil || x.Status != "ok" || x.Result == nil || x.Result.Stdout != "ran\n" {
		t.Errorf("the stored execution: %+v, %v; want the result recorded", x, err)
	}
}
