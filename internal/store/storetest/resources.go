package storetest

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// testSessionResources: a session's extended resources (GPUs) are kept
// beside its limits, and ActiveSessions (recovery at start) carries them;
// the limits read back unchanged, and a session without any has none.
func testSessionResources(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	plain := newSession(t, s, a.ID, at(1), nil)
	if got, err := s.Session(ctx, a.ID, plain.ID); err != nil || len(got.Resources) != 0 {
		t.Errorf("a session made without resources reads back %v, %v; want none", got.Resources, err)
	}
	res := map[string]int64{"nvidia.com/gpu": 2, "example.com/fakegpu": 1}
	lim := kiln.Limits{MemoryBytes: 256 * kiln.MiB, CPUMillis: 500}
	ss := store.Session{UserID: a.ID, Created: at(2), Limits: lim, Resources: res}
	must(t, "create", s.CreateSession(ctx, &ss))
	got, err := s.Session(ctx, a.ID, ss.ID)
	must(t, "get", err)
	if !maps.Equal(got.Resources, res) || got.Limits != lim {
		t.Errorf("read back resources %v, limits %+v; want %v, %+v", got.Resources, got.Limits, res, lim)
	}
	act, err := s.ActiveSessions(ctx)
	must(t, "active sessions", err)
	i := slices.IndexFunc(act, func(x store.Session) bool { return x.ID == ss.ID })
	if i < 0 || !maps.Equal(act[i].Resources, res) {
		t.Errorf("ActiveSessions: %+v; want the session with resources %v", act, res)
	}
}
