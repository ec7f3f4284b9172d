//go:build linux && bench

package docker

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/bench"
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

// TestBenchBackends is kiln bench --backend docker at a small size on
// this test binary's image: native and Docker side by side through the
// service, against a plain container, and it checks issue 14's targets
// (one-shot runs from the pool at least 10x faster than the plain
// container; a pooled session within 2x of native). As root, with an
// engine: go test -tags bench -run TestBenchBackends -v ./internal/backend/docker/
func TestBenchBackends(t *testing.T) {
	nb, err := native.New(native.Config{}, nil)
	if err != nil {
		t.Skipf("native backend: %v", err)
	}
	db := testBackend(t)
	db.SetOwner("kiln-bench-test")
	argv := []string{"/usr/bin/python3", "-c", "print(1)"}
	o := bench.BackendsOptions{Runs: 7, Cells: 70, Throughput: 40, Concurrency: 8, PoolSize: 2,
		PlainName: "the plain container through the Engine API",
		Plain:     func(ctx context.Context) (string, error) { return db.PlainRun(ctx, argv) }}
	if cli, err := exec.LookPath("docker"); err == nil {
		o.PlainName = "docker run --rm --network none"
		o.Plain = func(ctx context.Context) (string, error) {
			out, err := exec.CommandContext(ctx, cli, "run", "--rm", "--network", "none", "-v", "/usr:/usr:ro", "--entrypoint", argv[0], db.Image(), argv[1], argv[2]).Output()
			return string(out), err
		}
	}
	r, err := bench.Backends(context.Background(), []bench.Named{{Name: "native", Engine: engine.New(nb, nil)}, {Name: "docker", Engine: engine.New(db, nil)}}, o, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.Print(&out)
	t.Log("\n" + out.String())
	native, dock := r.Backends[0], r.Backends[1]
	if x := float64(r.Plain.Median) / float64(dock.RunPooled.Median); x < 10 {
		t.Errorf("a one-shot run from Docker's pool is %.1fx faster than a plain container; want at least 10x", x)
	}
	if x := float64(dock.ReadyPooled.Median) / float64(native.ReadyPooled.Median); x > 2 {
		t.Errorf("a pooled Docker session (create + first 1+1) is %.2fx native's; want at most 2x", x)
	}
}
