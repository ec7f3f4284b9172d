package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/unboxed"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// gpuBackend is the unboxed backend as one that allows extended
// resources (as the Kubernetes backend with --k8s-extended-resource),
// and keeps what each sandbox asked for.
type gpuBackend struct {
	engine.Backend
	mu    sync.Mutex
	asked []map[string]int64
}

func (*gpuBackend) ExtendedResources() map[string]int64 {
	return map[string]int64{"example.com/fakegpu": 2}
}

func (g *gpuBackend) CreateSandbox(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	g.mu.Lock()
	g.asked = append(g.asked, spec.Resources)
	g.mu.Unlock()
	return g.Backend.CreateSandbox(ctx, spec)
}

// A session's extended resources reach the backend's sandbox when the
// backend allows them; any other, or too many, is refused naming what is
// allowed, before a sandbox is made; and such a session never takes a
// pooled sandbox, which has none.
func TestSessionResources(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.DiscardHandler)
	g := &gpuBackend{Backend: unboxed.New(t.TempDir())}
	svc, err := New(ctx, Config{DataDir: dir, Workspaces: workspace.Plain, PoolSize: 1}, st, engine.New(g, log), log)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	u := kiln.User{Name: "gpu-user"}
	if err := st.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	// the pool has made its sandbox, with none
	for deadline := time.Now().Add(time.Minute); ; {
		g.mu.Lock()
		n := len(g.asked)
		g.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.mu.Lock()
	made := len(g.asked)
	g.mu.Unlock()

	for _, c := range []struct {
		asked map[string]int64
		want  string
	}{
		{map[string]int64{"nvidia.com/gpu": 1}, `"nvidia.com/gpu" is not allowed on this server; allowed: example.com/fakegpu (at most 2)`},
		{map[string]int64{"example.com/fakegpu": 3}, "3 is outside the allowed range 1 to 2"},
	} {
		_, err := svc.CreateSession(ctx, u, SessionSpec{Resources: c.asked})
		if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a session asking for %v: %v; want invalid, %q", c.asked, err, c.want)
		}
	}
	rec, err := svc.CreateSession(ctx, u, SessionSpec{Resources: map[string]int64{"example.com/fakegpu": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.DeleteSession(ctx, u, rec.ID)
	if got, err := svc.Session(ctx, u, rec.ID); err != nil || got.Resources["example.com/fakegpu"] != 1 {
		t.Errorf("the session read back: resources %v, %v; want example.com/fakegpu 1", got.Resources, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.asked) != made+1 || g.asked[made]["example.com/fakegpu"] != 1 {
		t.Errorf("sandboxes made after the pool's %d: %v; want one more, with example.com/fakegpu 1 (not the pooled one)", made, g.asked[made:])
	}
}
