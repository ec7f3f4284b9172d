//go:build linux && bench

package docker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestBenchWarmCell measures a warm Python `1+1` cell and a session's
// creation, native against Docker, in the same run (medians).
// A measurement, not a check: go test -tags bench -run TestBenchWarmCell, as root; docs/PERFORMANCE.md
// has its figures.
func TestBenchWarmCell(t *testing.T) {
	nb, err := native.New(native.Config{}, nil)
	if err != nil {
		t.Skipf("native backend: %v", err)
	}
	backends := map[string]engine.Backend{"native": nb, "docker": testBackend(t)}
	for _, name := range []string{"native", "docker"} {
		e := engine.New(backends[name], nil)
		var create, cell []time.Duration
		for range 5 {
			ctx := context.Background()
			start := time.Now()
			s, err := e.NewSession(ctx, engine.SessionSpec{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Run(ctx, engine.Cell{Language: "python", Code: "1"}, engine.Events{}); err != nil {
				t.Fatal(err)
			}
			create = append(create, time.Since(start))
			for range 10 {
				start := time.Now()
				res, err := s.Run(ctx, engine.Cell{Language: "python", Code: "1+1"}, engine.Events{})
				if err != nil || res.Status != kiln.StatusOK {
					t.Fatalf("%v %+v", err, res)
				}
				cell = append(cell, time.Since(start))
			}
			s.Close(ctx)
		}
		t.Logf("%s: session create + first Python cell median %v; warm 1+1 cell median %v", name, median(create), median(cell))
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
