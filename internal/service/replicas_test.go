package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/store/postgres"
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
