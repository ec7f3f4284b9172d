package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend/unboxed"
)

// namedBackend records the replica id it is given.
type namedBackend struct {
	*unboxed.Backend
	replica string
}

func (b *namedBackend) SetReplica(id string) { b.replica = id }

// kiln serve with replicas names the replica to a backend that labels
// sandboxes with it, before anything is made, with the id kept in the
// data directory (the one the service registers); again, the same id.
func TestNameReplica(t *testing.T) {
	data := t.TempDir()
	b := &namedBackend{Backend: unboxed.New(t.TempDir())}
	if err := nameReplica(b, data); err != nil {
		t.Fatal(err)
	}
	kept, err := os.ReadFile(filepath.Join(data, "replica-id"))
	if err != nil || b.replica == "" || b.replica != strings.TrimSpace(string(kept)) {
		t.Fatalf("the backend was named %q; the data directory keeps %q (%v)", b.replica, kept, err)
	}
	first := b.replica
	if err := nameReplica(b, data); err != nil || b.replica != first {
		t.Errorf("named again: %q, %v; want the same %q", b.replica, err, first)
	}
	if err := nameReplica(unboxed.New(t.TempDir()), data); err != nil {
		t.Errorf("a backend without replica labels: %v", err)
	}
}
