package service

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/unboxed"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// TestMountsSurviveRestart: a session's read-only mounts are stored with
// it, so after a restart of the service on the same store the session
// reads them back and its next sandbox gets them again; a mount whose
// root the administrator no longer allows is left out then.
func TestMountsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	roots := t.TempDir()
	a, b := filepath.Join(roots, "a"), filepath.Join(roots, "b")
	for _, d := range []string{a, b, filepath.Join(a, "proj"), filepath.Join(b, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open := func(mountRoots ...string) (*Service, func()) {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		st, err := sqlite.Open(context.Background(), filepath.Join(dir, "kiln.db"))
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(context.Background(), Config{DataDir: dir, Workspaces: workspace.Plain, PoolSize: -1, MountRoots: mountRoots},
			st, engine.New(unboxed.New(t.TempDir()), log), log)
		if err != nil {
			t.Fatal(err)
		}
		return svc, func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			svc.Close(ctx)
			st.Close()
		}
	}
	svc, closeSvc := open(a, b)
	ctx := ctxT(t, 2*time.Minute)
	u := kiln.User{Name: "u"}
	if err := svc.store.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	want := []backend.Mount{{Source: filepath.Join(a, "proj"), Target: "/project"}, {Source: filepath.Join(b, "data"), Target: "/mnt/data"}}
	s, err := svc.CreateSession(ctx, u, SessionSpec{Languages: []string{"bash"}, Mounts: want})
	if err != nil {
		t.Fatal(err)
	}
	closeSvc()

	// The same roots: both mounts come back.
	svc, closeSvc = open(a, b)
	got, err := svc.Session(ctx, u, s.ID)
	if err != nil || len(got.Mounts) != 2 || got.Mounts[0].Source != want[0].Source || got.Mounts[1].Target != "/mnt/data" {
		t.Errorf("after a restart the session reads back mounts %+v, %v; want %+v", got.Mounts, err, want)
	}
	if l := svc.lookup(s.ID); l == nil || !slices.Equal(l.mounts, want) {
		t.Errorf("after a restart the session's next sandbox gets mounts %+v; want %+v", l.mounts, want)
	}
	if res := cellOut(t, &testService{Service: svc}, u, s.ID, "bash", "echo hi"); res.Stdout != "hi\n" {
		t.Fatalf("a cell after the restart: %+v", res)
	}
	closeSvc()

	// Root b is no longer allowed: its mount is left out.
	svc, closeSvc = open(a)
	defer closeSvc()
	if l := svc.lookup(s.ID); l == nil || !slices.Equal(l.mounts, want[:1]) {
		t.Errorf("after a restart without root b, the session's mounts are %+v; want only %+v", l.mounts, want[:1])
	}
}
