package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// testSessionNetwork: a session's network policy is kept from its
// creation and through SetNetwork, and ActiveSessions (recovery at start)
// carries it; none reads back as none; only the owner's session is set.
func testSessionNetwork(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b := newUser(t, s, "a"), newUser(t, s, "b")
	plain := newSession(t, s, a.ID, at(1), nil)
	if got, err := s.Session(ctx, a.ID, plain.ID); err != nil || got.Network.Normal().Mode != kiln.NetworkNone || len(got.Network.Allow) != 0 {
		t.Errorf("a session made without a policy reads back %+v, %v; want none", got.Network, err)
	}
	allow := kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com", "*.example.org:8443"}}
	ss := store.Session{UserID: a.ID, Created: at(2), Network: allow}
	must(t, "create", s.CreateSession(ctx, &ss))
	same := func(what string, want kiln.NetworkPolicy) {
		t.Helper()
		got, err := s.Session(ctx, a.ID, ss.ID)
		must(t, what, err)
		if got.Network.Normal().Mode != want.Normal().Mode || !slices.Equal(got.Network.Allow, want.Allow) {
			t.Errorf("%s: network %+v, want %+v", what, got.Network, want)
		}
	}
	same("after create", allow)
	other := kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"api.example.net"}}
	must(t, "set network", s.SetNetwork(ctx, a.ID, ss.ID, other))
	same("after SetNetwork", other)
	act, err := s.ActiveSessions(ctx)
	must(t, "active sessions", err)
	found := false
	for _, x := range act {
		if x.ID == ss.ID {
			found = true
			if !slices.Equal(x.Network.Allow, other.Allow) {
				t.Errorf("ActiveSessions: network %+v, want %+v", x.Network, other)
			}
		}
	}
	if !found {
		t.Errorf("ActiveSessions misses the session")
	}
	wantErr(t, "another user's session", s.SetNetwork(ctx, b.ID, ss.ID, kiln.NetworkPolicy{}), store.ErrNotFound)
	same("after another user's SetNetwork", other)
	must(t, "set none", s.SetNetwork(ctx, a.ID, ss.ID, kiln.NetworkPolicy{Mode: kiln.NetworkNone}))
	same("after SetNetwork none", kiln.NetworkPolicy{})
}
