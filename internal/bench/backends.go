package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// Named is an engine on one backend, by the backend's name.
type Named struct {
	Name   string
	Engine *engine.Engine
}

// BackendsOptions choose what the side-by-side benchmark measures.
type BackendsOptions struct {
	Runs        int // samples per latency figure, per backend
	Cells       int // warm cells per backend
	Throughput  int // one-shot runs per throughput figure, per backend
	Concurrency int // clients at once in the throughput figure
	PoolSize    int // the warm pool's size, and the one-shot pool's per language
	// Plain, when set, is the baseline the pools are compared with: a
	// plain container running python3 -c 'print(1)' that prints "1\n"
	// (docker run --rm --network none), named by PlainName.
	Plain     func(context.Context) (string, error)
	PlainName string
	// Log receives the services' own log; nil discards it.
	Log *slog.Logger
}

// BackendFigures are one backend's figures, through the HTTP API of an
// in-process service with a sqlite store, as Service measures them.
type BackendFigures struct {
	Name                      string
	RunFresh, RunPooled       Stat // POST /v1/run of print(1): no one-shot pool; from it
	CreateFresh, CreatePooled Stat // POST /v1/sessions until 201: no warm pool; from it
	FirstFresh, FirstPooled   Stat // the first `1+1` right after the creation
	ReadyFresh, ReadyPooled   Stat // creation and first `1+1`, summed per session
	Warm, WarmEngine          Stat // a warm `1+1`: via HTTP; at the engine API
	PerSec                    float64
	QueueFull                 int // 503 queue_full answers retried in the throughput figure
}

// BackendsReport is the side-by-side outcome: every figure of every
// backend, and the baselines, from the same run with interleaved samples.
type BackendsReport struct {
	Opts     BackendsOptions
	Bare     Stat // python3 -c 'print(1)' on the host
	Plain    Stat // Opts.Plain, if set
	Backends []BackendFigures
}

// Backends measures the same figures on several backends side by side.
// Each backend gets its own service; samples are interleaved (one of
// each backend in turn, with the baselines) so that the machine's noise
// hits all of them alike, and every pooled sample starts with every pool
// full and settled, so that no backend's refill runs under another's
// timing. It needs root, like the engine.
func Backends(ctx context.Context, engines []Named, o BackendsOptions, progress io.Writer) (*BackendsReport, error) {
	if o.Runs < 1 || o.Cells < 1 || o.Throughput < 1 || o.Concurrency < 1 || o.PoolSize < 1 || len(engines) == 0 {
		return nil, errors.New("backend benchmark: runs, cells, throughput runs, concurrency, pool size and backends must be at least 1")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	r := &BackendsReport{Opts: o, Backends: make([]BackendFigures, len(engines))}
	for i, n := range engines {
		r.Backends[i].Name = n.Name
	}
	cpus := runtime.NumCPU()
	cfg := service.Config{PoolSize: -1, Concurrency: cpus, QueueLength: 16 * cpus}
	if err := r.fresh(ctx, engines, cfg, progress); err != nil {
		return nil, err
	}
	cfg.PoolSize, cfg.RunPoolSize = o.PoolSize, o.PoolSize
	if err := r.pooled(ctx, engines, cfg, progress); err != nil {
		return nil, err
	}
	return r, nil
}

// startAll starts one service per engine.
func startAll(ctx context.Context, engines []Named, cfg service.Config, log *slog.Logger) ([]*harness, func(), error) {
	var hs []*harness
	closeAll := func() {
		for _, h := range hs {
			h.close()
		}
	}
	for _, n := range engines {
		h, err := startService(ctx, n.Engine, cfg, log.With("backend", n.Name))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		h.runPool = cfg.RunPoolSize
		hs = append(hs, h)
	}
	return hs, closeAll, nil
}

// fresh measures without pools: one-shot runs and sessions each on a new
// sandbox, the baselines, and warm cells.
func (r *BackendsReport) fresh(ctx context.Context, engines []Named, cfg service.Config, progress io.Writer) error {
	hs, closeAll, err := startAll(ctx, engines, cfg, r.Opts.Log)
	if err != nil {
		return err
	}
	defer closeAll()
	n := len(hs)
	runs, creates, firsts, readies := make([][]time.Duration, n), make([][]time.Duration, n), make([][]time.Duration, n), make([][]time.Duration, n)
	var bare, plain []time.Duration
	for i := -1; i < r.Opts.Runs; i++ { // i == -1 warms every path, untimed
		d, err := timed(func() error { return bare1(ctx) })
		if err != nil {
			return err
		}
		if i >= 0 {
			bare = append(bare, d)
		}
		if r.Opts.Plain != nil {
			d, err := timed(func() error { return plainRun(ctx, r.Opts.Plain) })
			if err != nil {
				return fmt.Errorf("%s: %w", r.Opts.PlainName, err)
			}
			if i >= 0 {
				plain = append(plain, d)
			}
		}
		for b, h := range hs {
			d, err := timed(func() error { return runPrint(ctx, h) })
			if err != nil {
				return fmt.Errorf("%s: fresh one-shot run: %w", engines[b].Name, err)
			}
			c, f, err := h.creation(ctx)
			if err != nil {
				return fmt.Errorf("%s: fresh session: %w", engines[b].Name, err)
			}
			if i >= 0 {
				runs[b], creates[b], firsts[b], readies[b] = append(runs[b], d), append(creates[b], c), append(firsts[b], f), append(readies[b], c+f)
			}
		}
	}
	r.Bare, r.Plain = statOf(bare), statOf(plain)
	for b := range hs {
		f := &r.Backends[b]
		f.RunFresh, f.CreateFresh, f.FirstFresh, f.ReadyFresh = statOf(runs[b]), statOf(creates[b]), statOf(firsts[b]), statOf(readies[b])
	}
	fmt.Fprintln(progress, "backends: fresh runs and sessions done")
	if err := r.warm(ctx, engines, hs); err != nil {
		return err
	}
	fmt.Fprintln(progress, "backends: warm cells done")
	return nil
}

// warm measures a warm `1+1` via HTTP and at the engine, one session of
// each kind per backend, the cells interleaved across backends.
func (r *BackendsReport) warm(ctx context.Context, engines []Named, hs []*harness) error {
	type pair struct {
		id string
		es *engine.Session
	}
	ps := make([]pair, len(hs))
	defer func() {
		for b, p := range ps {
			if p.id != "" {
				hs[b].user.DeleteSession(context.WithoutCancel(ctx), p.id)
			}
			if p.es != nil {
				p.es.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	for b, h := range hs {
		s, err := h.user.CreateSession(ctx, client.SessionRequest{})
		if err != nil {
			return err
		}
		ps[b].id = s.ID
		if ps[b].es, err = engines[b].Engine.NewSession(ctx, engine.SessionSpec{}); err != nil {
			return err
		}
	}
	viaHTTP, direct := make([][]time.Duration, len(hs)), make([][]time.Duration, len(hs))
	for i := -3; i < r.Opts.Cells; i++ { // the first cells start the kernels
		for b, h := range hs {
			d, err := timed(func() error { return onePlusOne(ctx, h.user, ps[b].id) })
			if err != nil {
				return fmt.Errorf("%s: warm cell via HTTP: %w", engines[b].Name, err)
			}
			e, err := timed(func() error { return expect(ctx, ps[b].es, "python", "1+1", "2") })
			if err != nil {
				return fmt.Errorf("%s: warm cell at the engine: %w", engines[b].Name, err)
			}
			if i >= 0 {
				viaHTTP[b], direct[b] = append(viaHTTP[b], d), append(direct[b], e)
			}
		}
	}
	for b := range hs {
		r.Backends[b].Warm, r.Backends[b].WarmEngine = statOf(viaHTTP[b]), statOf(direct[b])
	}
	return nil
}

// pooled measures with both pools: one-shot runs and sessions taken
// ready, then throughput.
func (r *BackendsReport) pooled(ctx context.Context, engines []Named, cfg service.Config, progress io.Writer) error {
	hs, closeAll, err := startAll(ctx, engines, cfg, r.Opts.Log)
	if err != nil {
		return err
	}
	defer closeAll()
	settled := func() error {
		for _, h := range hs {
			if err := h.poolsFull(ctx); err != nil {
				return err
			}
		}
		return sleep(ctx, poolSettle)
	}
	n := len(hs)
	runs, creates, firsts, readies := make([][]time.Duration, n), make([][]time.Duration, n), make([][]time.Duration, n), make([][]time.Duration, n)
	for i := 0; i < r.Opts.Runs; i++ {
		for b, h := range hs {
			if err := settled(); err != nil {
				return err
			}
			d, err := timed(func() error { return runPrint(ctx, h) })
			if err != nil {
				return fmt.Errorf("%s: pooled one-shot run: %w", engines[b].Name, err)
			}
			if err := settled(); err != nil {
				return err
			}
			c, f, err := h.creation(ctx)
			if err != nil {
				return fmt.Errorf("%s: pooled session: %w", engines[b].Name, err)
			}
			runs[b], creates[b], firsts[b], readies[b] = append(runs[b], d), append(creates[b], c), append(firsts[b], f), append(readies[b], c+f)
		}
	}
	for b := range hs {
		f := &r.Backends[b]
		f.RunPooled, f.CreatePooled, f.FirstPooled, f.ReadyPooled = statOf(runs[b]), statOf(creates[b]), statOf(firsts[b]), statOf(readies[b])
	}
	fmt.Fprintln(progress, "backends: pooled runs and sessions done")
	// Throughput in two alternating halves per backend, each from full
	// pools, so that a change in the machine's load hits all of them.
	spent := make([]time.Duration, n)
	queueFull := make([]atomic.Int64, n)
	done := 0
	for half := 0; half < 2; half++ {
		k := r.Opts.Throughput / 2
		if half == 1 {
			k = r.Opts.Throughput - done
		}
		for b, h := range hs {
			if err := settled(); err != nil {
				return err
			}
			d, err := timed(func() error {
				return concurrently(ctx, r.Opts.Concurrency, k, func(ctx context.Context) error { return runRetrying(ctx, h, &queueFull[b]) })
			})
			if err != nil {
				return fmt.Errorf("%s: throughput: %w", engines[b].Name, err)
			}
			spent[b] += d
		}
		done += k
	}
	for b := range hs {
		r.Backends[b].PerSec = float64(r.Opts.Throughput) / spent[b].Seconds()
		r.Backends[b].QueueFull = int(queueFull[b].Load())
	}
	fmt.Fprintln(progress, "backends: throughput done")
	return nil
}

// poolsFull waits until the warm pool and the one-shot Python pool are
// full.
func (h *harness) poolsFull(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		n, err := h.poolReady(ctx)
		if err != nil {
			return err
		}
		if n >= h.size && h.svc.RunPoolReady("python") >= h.runPool {
			return nil
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("the pools did not fill (warm pool %d of %d): %w", n, h.size, err)
		}
	}
}

// creation times one session's creation and its first `1+1`, then
// deletes it, untimed.
func (h *harness) creation(ctx context.Context) (create, first time.Duration, err error) {
	start := time.Now()
	s, err := h.user.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		return 0, 0, err
	}
	create = time.Since(start)
	first, err = timed(func() error { return onePlusOne(ctx, h.user, s.ID) })
	if derr := h.user.DeleteSession(ctx, s.ID); err == nil {
		err = derr
	}
	return create, first, err
}

// runPrint is POST /v1/run of Python's print(1), checked.
func runPrint(ctx context.Context, h *harness) error {
	return runRetrying(ctx, h, nil)
}

// runRetrying is runPrint that retries a 503 queue_full (the queue's
// bound is the operator's policy, not a cost), counting it in full.
func runRetrying(ctx context.Context, h *harness, full *atomic.Int64) error {
	for {
		res, err := h.user.Run(ctx, client.RunRequest{Language: "python", Code: program})
		var p *client.Problem
		if full != nil && errors.As(err, &p) && p.Code == "queue_full" {
			full.Add(1)
			if err := sleep(ctx, 10*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if res.Result.Status != kiln.StatusOK || res.Result.Stdout != "1\n" {
			return fmt.Errorf("/v1/run: status %s, stdout %q, stderr %q", res.Result.Status, res.Result.Stdout, res.Result.Stderr)
		}
		return nil
	}
}

func bare1(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", program).Output()
	if err != nil || string(out) != "1\n" {
		return fmt.Errorf("bare python3: %q, %v", out, err)
	}
	return nil
}

func plainRun(ctx context.Context, f func(context.Context) (string, error)) error {
	out, err := f(ctx)
	if err == nil && out != "1\n" {
		err = fmt.Errorf("printed %q, want \"1\\n\"", out)
	}
	return err
}

// Print writes the figures side by side, with each backend's ratio to
// the first (the baseline backend, native) and the targets' ratios.
func (r *BackendsReport) Print(w io.Writer) {
	o := r.Opts
	fmt.Fprintf(w, "backends side by side (one run; HTTP API of an in-process service per backend, sqlite;\n")
	fmt.Fprintf(w, "medians of %d samples, %d warm cells; pools of %d, full and settled before each pooled sample)\n", o.Runs, o.Cells, o.PoolSize)
	fmt.Fprintf(w, "  %-46s", "")
	for _, b := range r.Backends {
		fmt.Fprintf(w, " %12s", b.Name)
	}
	if len(r.Backends) > 1 {
		fmt.Fprintf(w, "  %s/%s", r.Backends[len(r.Backends)-1].Name, r.Backends[0].Name)
	}
	fmt.Fprintln(w)
	row := func(what string, f func(BackendFigures) time.Duration) {
		fmt.Fprintf(w, "  %-46s", what)
		for _, b := range r.Backends {
			fmt.Fprintf(w, " %9.2f ms", ms(f(b)))
		}
		if len(r.Backends) > 1 {
			fmt.Fprintf(w, "  %.2fx", ratio(f(r.Backends[len(r.Backends)-1]), f(r.Backends[0])))
		}
		fmt.Fprintln(w)
	}
	row("one-shot python print(1), fresh sandbox", func(b BackendFigures) time.Duration { return b.RunFresh.Median })
	row("one-shot python print(1), from the pool", func(b BackendFigures) time.Duration { return b.RunPooled.Median })
	row("session create, fresh", func(b BackendFigures) time.Duration { return b.CreateFresh.Median })
	row("session create, from the warm pool", func(b BackendFigures) time.Duration { return b.CreatePooled.Median })
	row("session create + first 1+1, fresh", func(b BackendFigures) time.Duration { return b.ReadyFresh.Median })
	row("session create + first 1+1, from the pool", func(b BackendFigures) time.Duration { return b.ReadyPooled.Median })
	row("warm python 1+1 via HTTP", func(b BackendFigures) time.Duration { return b.Warm.Median })
	row("warm python 1+1 at the engine API", func(b BackendFigures) time.Duration { return b.WarmEngine.Median })
	fmt.Fprintf(w, "  %-46s", fmt.Sprintf("/v1/run throughput at c=%d, with the pools", o.Concurrency))
	for _, b := range r.Backends {
		fmt.Fprintf(w, " %10.1f/s", b.PerSec)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  baseline: bare python3 -c 'print(1)' on the host  %8.2f ms\n", ms(r.Bare.Median))
	if o.Plain != nil {
		fmt.Fprintf(w, "  baseline: %s  %8.2f ms\n", o.PlainName, ms(r.Plain.Median))
		for _, b := range r.Backends {
			fmt.Fprintf(w, "  %s one-shot from the pool is %.1fx faster than the plain container (target for docker: >= 10x)\n",
				b.Name, ratio(r.Plain.Median, b.RunPooled.Median))
		}
	}
	if len(r.Backends) > 1 {
		base := r.Backends[0]
		for _, b := range r.Backends[1:] {
			fmt.Fprintf(w, "  %s pooled session (create + first 1+1) is %.2fx %s's (target: <= 2x)\n",
				b.Name, ratio(b.ReadyPooled.Median, base.ReadyPooled.Median), base.Name)
		}
	}
}
