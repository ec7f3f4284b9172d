package service

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/backend/unboxed"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/workspace"
)

func TestMain(m *testing.M) {
	agent.Dispatch()
	os.Exit(m.Run())
}

// syncBuffer is a log sink that tests read while the service writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testService is a real service, with its log kept for the test to read.
type testService struct {
	*Service
	logs *syncBuffer
}

// newTestService is a service on the unboxed backend, with plain
// directories as workspaces: no isolation and no cgroup limits, no root
// needed.
func newTestService(t *testing.T, cfg Config) *testService {
	t.Helper()
	return newServiceOn(t, cfg, false)
}

// newNativeService is a service on the native backend, for tests of what
// only a sandbox enforces (memory, workspace size); it needs root.
func newNativeService(t *testing.T, cfg Config) *testService {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: this test checks limits that only the native backend's sandboxes enforce")
	}
	return newServiceOn(t, cfg, true)
}

func newServiceOn(t *testing.T, cfg Config, sandboxed bool) *testService {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ctx := context.Background()
	dir := t.TempDir()
	// The sandboxes' unprivileged host uids must reach their workspaces.
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	var b engine.Backend = unboxed.New(t.TempDir())
	if sandboxed {
		nb, err := native.New(native.Config{}, log)
		if err != nil {
			t.Fatal(err)
		}
		b = nb
	} else {
		cfg.Workspaces = workspace.Plain
	}
	cfg.DataDir = dir
	if cfg.PoolSize == 0 {
		cfg.PoolSize = -1
	}
	svc, err := New(ctx, cfg, st, engine.New(b, log), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		svc.mu.Lock()
		all := make([]*live, 0, len(svc.sessions))
		for _, l := range svc.sessions {
			all = append(all, l)
		}
		svc.mu.Unlock()
		for _, l := range all {
			svc.endSession(ctx, l, ReasonDeleted, "deleted")
		}
		svc.Close(ctx)
		st.Close()
	})
	return &testService{Service: svc, logs: logs}
}

// user makes a user in the store.
func (ts *testService) user(t *testing.T, name string, admin bool) kiln.User {
	t.Helper()
	u := kiln.User{Name: name, Admin: admin}
	if err := ts.store.CreateUser(context.Background(), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
