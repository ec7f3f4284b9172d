// Package stack wires kiln's service as kiln serve runs it: a store, an
// engine on a backend, the service and its HTTP server. kiln serve, the
// server's tests and the benchmark build theirs here, so the wiring is
// written once.
package stack

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/server"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
)

// Config says what to wire. Service.DataDir is required; every other
// field has a default.
type Config struct {
	Service service.Config
	HTTP    server.Config
	// Store is the store to use; nil opens SQLite at DataDir/kiln.db.
	// The stack closes it either way.
	Store store.Store
	// View, when set, is the service's view of the store (a test's, e.g.
	// one that fails on cue).
	View func(store.Store) store.Store
	// Engine runs the sandboxes; nil: an engine on the native backend.
	Engine *engine.Engine
	Log    *slog.Logger // nil: discarded
}

// Stack is a wired kiln: the service and the HTTP handler over it.
type Stack struct {
	Store   store.Store
	Service *service.Service
	Server  *server.Server
}

// New wires a stack: it makes DataDir (0711, so that the sandboxes' host
// uids reach their workspaces below it) and opens the store, the engine,
// the service and the server. On an error nothing is left open.
func New(ctx context.Context, cfg Config) (_ *Stack, err error) {
	if cfg.Service.DataDir == "" {
		return nil, kiln.Errorf(kiln.Invalid, "the data directory is required")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Service.DataDir, 0o711); err != nil {
		return nil, kiln.Wrap(kiln.Invalid, err, "cannot make the data directory %s", cfg.Service.DataDir)
	}
	st := cfg.Store
	if st == nil {
		if st, err = sqlite.Open(ctx, filepath.Join(cfg.Service.DataDir, "kiln.db")); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	eng := cfg.Engine
	if eng == nil {
		b, err := native.New(native.Config{}, log)
		if err != nil {
			return nil, err
		}
		eng = engine.New(b, log)
	}
	view := st
	if cfg.View != nil {
		view = cfg.View(st)
	}
	svc, err := service.New(ctx, cfg.Service, view, eng, log)
	if err != nil {
		return nil, err
	}
	return &Stack{Store: st, Service: svc, Server: server.New(svc, cfg.HTTP, log)}, nil
}

// Close stops the service (its sessions' workspaces stay, as across any
// stop) and closes the store.
func (s *Stack) Close(ctx context.Context) error {
	return errors.Join(s.Service.Close(ctx), s.Store.Close())
}
