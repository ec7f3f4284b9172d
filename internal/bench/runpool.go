package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// RunPoolReport holds one-shot runs through POST /v1/run from the
// service's one-shot pool (sandboxes whose interpreter has started),
// against the bare interpreters on the host in the same run.
type RunPoolReport struct {
	Size                 int  // the pool's size per language
	BarePython, BareNode Stat // python3 -c / node -e on the host (baselines)
	// Python and Node are POST /v1/run until the answer, one at a time,
	// each with a ready sandbox (the pool refilled, untimed, before).
	Python, Node Stat
	// Fresh is the same Python run with the pool empty (a fresh sandbox,
	// the kernel started for it): today's path, the "before".
	Fresh Stat
	// PerSec is POST /v1/run throughput at the concurrency, sustained:
	// past the pool's size, runs wait for its refill or make their own.
	PerSec      float64
	Concurrency int
}

// runPool measures one-shot runs through the service's one-shot pool.
func (r *ServiceReport) runPool(ctx context.Context, h *harness, runs, conc, total int) (*RunPoolReport, error) {
	rp := &RunPoolReport{Size: h.runPool, Concurrency: conc}
	node := "console.log(1)"
	run := func(language, code string) error {
		res, err := h.user.Run(ctx, client.RunRequest{Language: language, Code: code})
		if err != nil {
			return err
		}
		if res.Result.Status != kiln.StatusOK || res.Result.Stdout != "1\n" {
			return fmt.Errorf("/v1/run %s: status %s, stdout %q, stderr %q", language, res.Result.Status, res.Result.Stdout, res.Result.Stderr)
		}
		return nil
	}
	host := func(bin string, args ...string) error {
		out, err := exec.CommandContext(ctx, bin, args...).Output()
		if err != nil || string(out) != "1\n" {
			return fmt.Errorf("bare %s: %q, %v", bin, out, err)
		}
		return nil
	}
	refilled := func() error {
		for h.svc.RunPoolReady("python") < h.runPool || h.svc.RunPoolReady("javascript") < h.runPool {
			if err := sleep(ctx, 5*time.Millisecond); err != nil {
				return err
			}
		}
		return nil
	}
	var bp, bn, py, js []time.Duration
	for i := 0; i < runs; i++ {
		if err := refilled(); err != nil {
			return nil, err
		}
		for _, m := range []struct {
			to *[]time.Duration
			f  func() error
		}{
			{&bp, func() error { return host("/usr/bin/python3", "-c", program) }},
			{&py, func() error { return run("python", program) }},
			{&bn, func() error { return host("/usr/bin/node", "-e", node) }},
			{&js, func() error { return run("javascript", node) }},
		} {
			d, err := timed(m.f)
			if err != nil {
				return nil, err
			}
			*m.to = append(*m.to, d)
		}
	}
	rp.BarePython, rp.BareNode, rp.Python, rp.Node = statOf(bp), statOf(bn), statOf(py), statOf(js)
	if err := refilled(); err != nil {
		return nil, err
	}
	d, err := timed(func() error {
		return concurrently(ctx, conc, total, func(ctx context.Context) error { return run("python", program) })
	})
	if err != nil {
		return nil, err
	}
	rp.PerSec = float64(total) / d.Seconds()
	return rp, nil
}

// freshRuns is POST /v1/run of Python on a service without a one-shot
// pool, one at a time, interleaved with bare python3: the figure before
// the pool.
func freshRuns(ctx context.Context, h *harness, runs int) (fresh, bare Stat, err error) {
	var fs, bs []time.Duration
	for i := 0; i < runs; i++ {
		d, err := timed(func() error {
			out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", program).Output()
			if err != nil || string(out) != "1\n" {
				return fmt.Errorf("bare python3: %q, %v", out, err)
			}
			return nil
		})
		if err != nil {
			return fresh, bare, err
		}
		bs = append(bs, d)
		if d, err = timed(func() error {
			res, err := h.user.Run(ctx, client.RunRequest{Language: "python", Code: program})
			if err == nil && res.Result.Stdout != "1\n" {
				err = fmt.Errorf("/v1/run: status %s, stdout %q", res.Result.Status, res.Result.Stdout)
			}
			return err
		}); err != nil {
			return fresh, bare, err
		}
		fs = append(fs, d)
	}
	return statOf(fs), statOf(bs), nil
}

// Print writes the one-shot pool's figures against their baselines.
func (rp *RunPoolReport) Print(w io.Writer, fresh, freshBare Stat, freshPerSec float64) {
	fmt.Fprintf(w, "one-shot runs via POST /v1/run (c=1, medians / p90; pool of %d per language refilled between runs)\n", rp.Size)
	row := func(what string, s, base Stat) {
		fmt.Fprintf(w, "  %-52s %8.2f ms %8.2f ms   %.2fx its bare baseline (%.2f ms)\n", what, ms(s.Median), ms(s.P90), ratio(s.Median, base.Median), ms(base.Median))
	}
	row("python print(1), fresh sandbox (no one-shot pool)", fresh, freshBare)
	row("python print(1), from the one-shot pool", rp.Python, rp.BarePython)
	row("javascript console.log(1), from the one-shot pool", rp.Node, rp.BareNode)
	fmt.Fprintf(w, "  %-52s %8.1f/s   (without the pool %.1f/s)\n", fmt.Sprintf("/v1/run python throughput at c=%d, pool of %d", rp.Concurrency, rp.Size), rp.PerSec, freshPerSec)
}
