package service

import (
	"context"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// Store is all the service asks of a store, and nothing more; the
// methods' contracts are store's. The adapters (store/sqlite,
// store/postgres) implement the whole store.Store, which their
// conformance suite checks.
type Store interface {
	store.Users
	store.Keys
	store.Executions
	store.Usage
	store.Audit
	store.Batches
	store.Shares

	CreateSession(ctx context.Context, s *kiln.Session) error
	Session(ctx context.Context, userID, id string) (kiln.Session, error)
	ListSessions(ctx context.Context, userID string, f store.SessionFilter, p store.Page) ([]kiln.Session, string, error)
	EndSession(ctx context.Context, userID, id, reason string, at time.Time) error
	SetNetwork(ctx context.Context, userID, id string, p kiln.NetworkPolicy) error
	ActiveSessions(ctx context.Context) ([]kiln.Session, error)

	AddArtifacts(ctx context.Context, userID, executionID string, arts []kiln.Artifact, at time.Time) error
}

var _ Store = store.Store(nil) // every full store is one
