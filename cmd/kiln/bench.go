package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/bench"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/workspace"
)

const benchUsage = `Usage: kiln bench [flags]

Measures what kiln adds to a bare run of the same program: sandbox start
and exec latency, throughput at several concurrencies, sessions and the
HTTP service. It takes a few minutes and prints a report; see
docs/PERFORMANCE.md for the figures and how to read them.

With --backend docker it measures instead the native and Docker backends
side by side in one run (one-shot Python fresh and from the pool, session
creation fresh and pooled, a warm 1+1 cell, throughput at --concurrency),
with a plain docker run --rm --network none of the environment image as
the baseline.

Flags:
`

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kiln bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchUsage); fs.PrintDefaults() }
	o := bench.Options{Concurrency: []int{1, 2, 8}}
	fs.IntVar(&o.Runs, "runs", 50, "latency samples per measurement")
	fs.IntVar(&o.Throughput, "throughput-runs", 200, "runs per throughput measurement")
	cliToo := fs.Bool("cli", true, "also time kiln run as a separate process")
	sessions := fs.Bool("sessions", true, "also measure sessions: ready time and warm cells")
	svc := fs.Bool("service", true, "also measure the HTTP service: session creation, warm cells, /v1/run, idle memory")
	var backendName string
	fs.StringVar(&backendName, "backend", "native", "native (kiln's own figures), or docker (native and Docker side by side, with a plain docker run as baseline)")
	conc := fs.Int("concurrency", 8, "with --backend docker: clients at once in the throughput figure")
	poolSize := fs.Int("pool", 4, "with --backend docker: the warm pool's size, and the one-shot pool's per language")
	density := fs.String("density", "", "instead of the rest, open idle Python sessions via HTTP up to each of these counts (e.g. 10,100,1000) and measure host memory per session and a warm cell in a random one")
	densityWS := fs.String("density-workspaces", "", "the density sessions' workspaces: disk (the service's default) or tmpfs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if o.Runs < 1 || o.Throughput < 1 {
		return fmt.Errorf("--runs and --throughput-runs must be at least 1")
	}
	if *cliToo {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		o.KilnBinary = self
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if backendName != "native" {
		bo := bench.BackendsOptions{Runs: o.Runs, Cells: o.Runs * 10, Throughput: o.Throughput, Concurrency: *conc, PoolSize: *poolSize, Log: log}
		return benchBackends(ctx, backendName, bo, stdout, stderr, log)
	}
	b, err := native.New(native.Config{}, log)
	if err != nil {
		return err
	}
	e := engine.New(b, log)
	if *density != "" {
		steps, err := parseSteps(*density)
		if err != nil {
			return err
		}
		var kind workspace.Kind
		if *densityWS != "" {
			if kind, err = workspace.ParseKind(*densityWS); err != nil {
				return fmt.Errorf("--density-workspaces: %w", err)
			}
		}
		dr, err := bench.Density(ctx, e, bench.DensityOptions{Steps: steps, Cells: o.Runs * 10, Workspaces: kind, Log: log}, stderr)
		if dr != nil {
			dr.Print(stdout)
		}
		return err
	}
	r, err := bench.Run(ctx, e, o, stderr)
	if err != nil {
		return err
	}
	r.Print(stdout)
	if *sessions {
		sr, err := bench.Sessions(ctx, e, max(o.Runs/2, 5), stderr)
		if err != nil {
			return err
		}
		sr.Print(stdout)
	}
	if *svc {
		so := bench.ServiceOptions{Runs: o.Runs, Cells: o.Runs * 10, Throughput: o.Throughput, Concurrency: 8,
			IdleSessions: 100, PoolSize: 4, RunPoolSize: 4, Log: log}
		vr, err := bench.Service(ctx, e, so, stderr)
		if err != nil {
			return err
		}
		vr.Print(stdout)
	}
	return nil
}

// parseSteps reads --density: ascending session counts, comma-separated.
func parseSteps(s string) ([]int, error) {
	var steps []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(steps) > 0 && n <= steps[len(steps)-1]) {
			return nil, fmt.Errorf("--density %q: want ascending session counts of at least 1, comma-separated, like 10,100,1000", s)
		}
		steps = append(steps, n)
	}
	return steps, nil
}
