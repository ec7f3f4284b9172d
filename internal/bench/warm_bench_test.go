package bench

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// BenchmarkWarmCellHTTP is a warm Python `1+1` through the HTTP API of an
// in-process service (the harness of Service: sqlite, loopback), for a
// CPU profile of the server's execute path:
//
//	go test -run XXX -bench WarmCellHTTP -benchtime 2000x -cpuprofile cpu.out ./internal/bench/
func BenchmarkWarmCellHTTP(b *testing.B) {
	h := benchService(b)
	defer h.close()
	ctx := context.Background()
	s, err := h.user.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.user.DeleteSession(ctx, s.ID)
	for range 3 { // the first cell starts the kernel
		if err := onePlusOne(ctx, h.user, s.ID); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if err := onePlusOne(ctx, h.user, s.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// benchService starts the in-process service the HTTP benchmarks share:
// the native backend, no pool, tmpfs workspaces.
func benchService(b *testing.B) *harness {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the service's sandboxes are the native backend's")
	}
	log := slog.New(slog.DiscardHandler)
	nb, err := native.New(native.Config{}, log)
	if err != nil {
		b.Fatal(err)
	}
	h, err := startService(context.Background(), engine.New(nb, log), service.Config{PoolSize: -1, Workspaces: workspace.Tmpfs}, log)
	if err != nil {
		b.Fatal(err)
	}
	return h
}
