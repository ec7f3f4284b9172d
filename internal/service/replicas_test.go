package service

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/postgres"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
)

// TestReplicaGoneBound: a bound under the minimum is refused in words
// (a zero heartbeat interval would panic the ticker), and a replica keeps
// its id across starts on one data directory.
func TestReplicaGoneBound(t *testing.T) {
	data := t.TempDir()
	s := &Service{cfg: Config{DataDir: data, Replicas: &postgres.Replicas{}, ReplicaGone: time.Millisecond}}
	err := s.joinReplicas(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--replica-gone 1ms is under the minimum of 1s") {
		t.Fatalf("joinReplicas with a 1ms bound: %v", err)
	}
	a, err := replicaID(data)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := replicaID(data); err != nil || a != b || a == "" {
		t.Errorf("replica ids %q, %q (%v), want one kept id", a, b, err)
	}
}

// racedStore plays the other replica's bootstrap landing between this
// one's look for users and its making of the admin.
type racedStore struct{ store.Store }

func (racedStore) ListUsers(context.Context, store.Page) ([]store.User, string, error) {
	return nil, "", nil
}

// TestBootstrapRacingReplica: when two replicas start at once on an
// empty database and the other makes the admin first, this one starts
// without a key of its own instead of failing on the name.
func TestBootstrapRacingReplica(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateUser(ctx, &store.User{Name: "admin", Admin: true}); err != nil {
		t.Fatal(err)
	}
	s := &Service{store: racedStore{st}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if key, err := s.Bootstrap(ctx); err != nil || key != "" {
		t.Fatalf("Bootstrap after another replica made the admin = %q, %v; want no key, no error", key, err)
	}
}
