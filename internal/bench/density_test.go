package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/workspace"
)

func TestMain(m *testing.M) {
	agent.Dispatch() // sandboxes re-execute this binary
	os.Exit(m.Run())
}

// TestDensity runs the density benchmark at two small steps: each step
// finds one sandbox per open session, splits its memory between the
// kernel and kiln's processes, times warm cells, and no sandbox is left
// when it returns.
func TestDensity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the density benchmark opens sandboxed sessions on the native backend")
	}
	log := slog.New(slog.DiscardHandler)
	b, err := native.New(native.Config{}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := Density(ctx, engine.New(b, log), DensityOptions{Steps: []int{1, 3}, Cells: 5, Workspaces: workspace.Tmpfs}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Steps) != 2 {
		t.Fatalf("got %d steps, want 2", len(r.Steps))
	}
	for _, s := range r.Steps {
		if s.Sandboxes != s.Open || s.KernelPSS <= 0 || s.KilnPSS <= 0 || s.PSS != s.KernelPSS+s.KilnPSS || s.Cgroup <= 0 {
			t.Errorf("%d open: %d sandboxes, PSS %d = kernel %d + kiln %d, cgroup %d", s.Open, s.Sandboxes, s.PSS, s.KernelPSS, s.KilnPSS, s.Cgroup)
		}
		if s.Warm.Median <= 0 || s.Health.Median <= 0 || s.Procs < 2 {
			t.Errorf("%d open: warm %v, health %v, %.1f processes per session", s.Open, s.Warm.Median, s.Health.Median, s.Procs)
		}
	}
	left, err := sandboxProcs(os.Getpid())
	if err != nil || len(left) != 0 {
		t.Errorf("sandbox processes left after the benchmark: %v, %v", left, err)
	}
}

func TestParseDensityFields(t *testing.T) {
	n, err := kbLessField([]byte("Name:\tpython3\nThreads:\t7\n"), "Threads")
	if err != nil || n != 7 {
		t.Errorf("Threads: got %d, %v; want 7", n, err)
	}
	if _, err := kbLessField([]byte("Name:\tx\n"), "Threads"); err == nil {
		t.Error("a status without Threads parsed")
	}
	if _, err := Density(context.Background(), nil, DensityOptions{Steps: []int{10, 5}, Cells: 1}, io.Discard); err == nil {
		t.Error("descending steps were accepted")
	}
}
