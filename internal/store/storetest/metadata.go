package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/internal/store"
)

// testSessionMetadata: SetSessionMetadata (the notebook's rename) sets one
// pair of a session's metadata, keeps the others, is what the metadata
// filter finds, removes the pair for an empty value, and finds no other
// user's session.
func testSessionMetadata(t *testing.T, s store.Store) {
	ctx := context.Background()
	set, ok := s.(interface {
		SetSessionMetadata(ctx context.Context, userID, id, key, value string) error
	})
	if !ok {
		t.Fatalf("%T has no SetSessionMetadata", s)
	}
	a, b := newUser(t, s, "a"), newUser(t, s, "b")
	ss := newSession(t, s, a.ID, at(1), map[string]string{"team": "data"})
	must(t, "set name", set.SetSessionMetadata(ctx, a.ID, ss.ID, "name", "Quarterly sales"))
	got, err := s.Session(ctx, a.ID, ss.ID)
	must(t, "get", err)
	if got.Metadata["name"] != "Quarterly sales" || got.Metadata["team"] != "data" {
		t.Errorf("metadata after the rename: %v, want name and team", got.Metadata)
	}
	found := func(name string) int {
		t.Helper()
		list, _, err := s.ListSessions(ctx, a.ID, store.SessionFilter{Metadata: map[string]string{"name": name}}, store.Page{})
		must(t, "list by name", err)
		return len(list)
	}
	if n := found("Quarterly sales"); n != 1 {
		t.Errorf("the filter on the new name finds %d sessions, want 1", n)
	}
	must(t, "rename", set.SetSessionMetadata(ctx, a.ID, ss.ID, "name", "Q3"))
	if found("Quarterly sales") != 0 || found("Q3") != 1 {
		t.Error("after a second rename the filter finds the old name, or not the new one")
	}
	must(t, "remove name", set.SetSessionMetadata(ctx, a.ID, ss.ID, "name", ""))
	got, err = s.Session(ctx, a.ID, ss.ID)
	must(t, "get", err)
	if _, has := got.Metadata["name"]; has || found("Q3") != 0 {
		t.Errorf("after removing the name: metadata %v", got.Metadata)
	}
	if err := set.SetSessionMetadata(ctx, b.ID, ss.ID, "name", "mine"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another user's rename: %v, want ErrNotFound", err)
	}
}
