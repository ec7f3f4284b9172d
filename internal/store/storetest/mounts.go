package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// testSessionMounts: a session's read-only mounts are kept from its
// creation, and ActiveSessions (recovery at start) carries them; a
// session without any reads back none.
func testSessionMounts(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := newUser(t, s, "a")
	plain := newSession(t, s, a.ID, at(1), nil)
	if got, err := s.Session(ctx, a.ID, plain.ID); err != nil || len(got.Mounts) != 0 {
		t.Errorf("a session made without mounts reads back %+v, %v; want none", got.Mounts, err)
	}
	mounts := []kiln.Mount{{Source: "/srv/roots/proj", Target: "/project"}, {Source: "/srv/roots/data ü"}}
	ss := store.Session{UserID: a.ID, Created: at(2), Mounts: mounts}
	must(t, "create", s.CreateSession(ctx, &ss))
	got, err := s.Session(ctx, a.ID, ss.ID)
	must(t, "get", err)
	if !slices.Equal(got.Mounts, mounts) {
		t.Errorf("mounts read back %+v, want %+v", got.Mounts, mounts)
	}
	act, err := s.ActiveSessions(ctx)
	must(t, "active sessions", err)
	i := slices.IndexFunc(act, func(x store.Session) bool { return x.ID == ss.ID })
	if i < 0 || !slices.Equal(act[i].Mounts, mounts) {
		t.Errorf("ActiveSessions: %+v; want the session with mounts %+v", act, mounts)
	}
}
