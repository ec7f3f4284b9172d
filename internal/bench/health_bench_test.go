package bench

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// BenchmarkHealthHTTP is GET /v1/health/live through the same harness as
// BenchmarkWarmCellHTTP: the HTTP round trip with no store and no
// sandbox, the baseline to hold a warm cell's time against in one run:
//
//	go test -run XXX -bench 'WarmCellHTTP|HealthHTTP' -count 6 ./internal/bench/
func BenchmarkHealthHTTP(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the harness starts the native backend")
	}
	log := slog.New(slog.DiscardHandler)
	nb, err := native.New(native.Config{}, log)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	h, err := startService(ctx, engine.New(nb, log), service.Config{PoolSize: -1, Workspaces: workspace.Tmpfs}, log)
	if err != nil {
		b.Fatal(err)
	}
	defer h.close()
	for b.Loop() {
		if err := h.user.Health(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
