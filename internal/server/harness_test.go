package server_test

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/backend/unboxed"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/server"
	"github.com/kiln-dev/kiln/internal/server/openapi/openapitest"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/stack"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/workspace"
)

func TestMain(m *testing.M) {
	agent.Dispatch()
	os.Exit(m.Run())
}

// env is a real kiln service behind a real HTTP server, with the first
// admin's client.
type env struct {
	t     *testing.T
	url   string
	admin *client.Client
	svc   *service.Service
	srv   *server.Server
	key   string
}

func (e *env) adminKey(t *testing.T) string { return e.key }

type options struct {
	svc       service.Config
	http      server.Config
	wrapStore func(store.Store) store.Store // a test's view of the store, e.g. one that fails
	log       *slog.Logger                  // the server's log; default: discarded
	// sandboxed runs the service on the native backend (root only), for
	// tests of what only a sandbox enforces (memory, workspace size).
	// Otherwise it runs on the unboxed backend with plain directories as
	// workspaces: no isolation, no cgroup limits, no root needed.
	sandboxed bool
}

func newEnv(t *testing.T, opts options) *env {
	t.Helper()
	if opts.sandboxed && os.Geteuid() != 0 {
		t.Skip("needs root: this test checks limits that only the native backend's sandboxes enforce")
	}
	if !opts.sandboxed {
		parallel(t)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if opts.log != nil {
		log = opts.log
	}
	ctx := context.Background()
	dir := t.TempDir()
	// The sandboxes' unprivileged host uids must be able to reach their
	// workspaces under the data directory.
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	cfg := opts.svc
	cfg.DataDir = dir
	if cfg.PoolSize == 0 {
		cfg.PoolSize = -1
	}
	var eng *engine.Engine // nil: the stack's native backend
	if !opts.sandboxed {
		eng = engine.New(unboxed.New(t.TempDir()), log)
		cfg.Workspaces = workspace.Plain
	}
	k, err := stack.New(ctx, stack.Config{Service: cfg, HTTP: opts.http, View: opts.wrapStore, Engine: eng, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	svc, srv := k.Service, k.Server
	key, err := svc.Bootstrap(ctx)
	if err != nil || key == "" {
		t.Fatalf("bootstrap: key %q, err %v", key, err)
	}
	// Every answer of every test is checked against the OpenAPI document;
	// a mismatch fails the test once its server has stopped.
	spec, err := openapitest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, e := range spec.Errors() {
			t.Errorf("the answer does not match /v1/openapi.json: %s", e)
		}
	})
	hs := httptest.NewServer(spec.Handler(srv))
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		k.Close(ctx)
		// Active sessions keep their workspaces across a stop, by design;
		// a test's are removed here.
		ws, err := workspace.OpenKind(filepath.Join(dir, "workspaces"), cmp.Or(cfg.Workspaces, workspace.Tmpfs))
		if err != nil {
			t.Error(err)
			return
		}
		ids, _ := ws.List()
		for _, id := range ids {
			if err := ws.Remove(id); err != nil {
				t.Error(err)
			}
		}
	})
	admin, err := client.New(hs.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, url: hs.URL, admin: admin, svc: svc, srv: srv, key: key}
}

// user makes a non-admin user and its client.
func (e *env) user(name string) *client.Client {
	e.t.Helper()
	ctx := context.Background()
	u, err := e.admin.CreateUser(ctx, client.UserRequest{Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	k, err := e.admin.CreateKey(ctx, u.ID, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := client.New(e.url, k.Secret)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// wantProblem checks that err is a problem with the status and code.
func wantProblem(t *testing.T, what string, err error, status int, code string) *client.Problem {
	t.Helper()
	p, ok := err.(*client.Problem)
	if !ok {
		t.Fatalf("%s: err = %v (%T), want a %d %s problem", what, err, err, status, code)
	}
	if p.Status != status || p.Code != code {
		t.Fatalf("%s: problem %d %s (%q), want %d %s", what, p.Status, p.Code, p.Detail, status, code)
	}
	return p
}

var parallelTests sync.Map

// parallel runs t in parallel with the other tests on the unboxed
// backend, whose sandboxes share nothing; once per test, however many
// environments it makes.
func parallel(t *testing.T) {
	if _, dup := parallelTests.LoadOrStore(t, true); !dup {
		t.Parallel()
	}
}
