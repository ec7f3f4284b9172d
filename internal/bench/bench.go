// Package bench measures kiln end to end: the latency a sandbox adds to a
// program against the same program run bare on the host, and one-shot
// throughput at several concurrencies. Figures are medians of repeated runs,
// and every comparison is made within one run, because the machines are
// shared and noisy.
package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// Options choose what to measure.
type Options struct {
	Runs        int    // latency samples per measurement
	Throughput  int    // runs per throughput measurement
	Concurrency []int  // throughput concurrencies
	KilnBinary  string // the kiln binary for the CLI measurement; "" skips it
}

// Report is the outcome, ready to print.
type Report struct {
	Bare, Engine, CLI time.Duration // medians
	PerSec            map[int]float64
	Runs              int
}

const program = "print(1)"

// Run measures with e and writes progress to log.
func Run(ctx context.Context, e *engine.Engine, o Options, log io.Writer) (*Report, error) {
	r := &Report{PerSec: map[int]float64{}, Runs: o.Runs}
	// Warm the page cache and the runtime's own caches first.
	for i := 0; i < 3; i++ {
		if err := bare(ctx); err != nil {
			return nil, err
		}
		if err := oneShot(ctx, e); err != nil {
			return nil, err
		}
	}
	// Interleave the samples so that noise hits all of them alike.
	var bareS, engS, cliS []time.Duration
	for i := 0; i < o.Runs; i++ {
		d, err := timed(func() error { return bare(ctx) })
		if err != nil {
			return nil, err
		}
		bareS = append(bareS, d)
		if d, err = timed(func() error { return oneShot(ctx, e) }); err != nil {
			return nil, err
		}
		engS = append(engS, d)
		if o.KilnBinary != "" {
			if d, err = timed(func() error { return cli(ctx, o.KilnBinary) }); err != nil {
				return nil, err
			}
			cliS = append(cliS, d)
		}
	}
	r.Bare, r.Engine, r.CLI = Median(bareS), Median(engS), Median(cliS)
	fmt.Fprintf(log, "latency: %d runs each done\n", o.Runs)
	for _, c := range o.Concurrency {
		ps, err := throughput(ctx, e, c, o.Throughput)
		if err != nil {
			return nil, err
		}
		r.PerSec[c] = ps
		fmt.Fprintf(log, "throughput at concurrency %d done\n", c)
	}
	return r, nil
}

// Print writes the report as a table.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "one-shot latency, median of %d runs of python3 -c '%s':\n", r.Runs, program)
	fmt.Fprintf(w, "  bare python3 on the host      %8.2f ms\n", ms(r.Bare))
	fmt.Fprintf(w, "  kiln engine (in-process)      %8.2f ms   +%.2f ms, %.2fx bare\n", ms(r.Engine), ms(r.Engine-r.Bare), ratio(r.Engine, r.Bare))
	if r.CLI > 0 {
		fmt.Fprintf(w, "  kiln run (CLI process)        %8.2f ms   +%.2f ms, %.2fx bare\n", ms(r.CLI), ms(r.CLI-r.Bare), ratio(r.CLI, r.Bare))
	}
	var cs []int
	for c := range r.PerSec {
		cs = append(cs, c)
	}
	sort.Ints(cs)
	for _, c := range cs {
		fmt.Fprintf(w, "one-shot throughput at concurrency %d: %.1f runs/s\n", c, r.PerSec[c])
	}
}

func bare(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", program).Output()
	if err != nil || string(out) != "1\n" {
		return fmt.Errorf("bare python3: %q, %v", out, err)
	}
	return nil
}

func cli(ctx context.Context, bin string) error {
	out, err := exec.CommandContext(ctx, bin, "run", "--lang", "python", "-c", program).Output()
	if err != nil || string(out) != "1\n" {
		return fmt.Errorf("kiln run: %q, %v", out, err)
	}
	return nil
}

func oneShot(ctx context.Context, e *engine.Engine) error {
	var out limitedWriter
	x, err := e.Run(ctx, engine.Run{Language: "python", Code: program, Limits: kiln.Limits{}}, &out, io.Discard)
	if err != nil {
		return err
	}
	if x.Code != 0 || string(out.b) != "1\n" {
		return fmt.Errorf("kiln run: exit %d, output %q", x.Code, out.b)
	}
	return nil
}

func throughput(ctx context.Context, e *engine.Engine, conc, total int) (float64, error) {
	jobs := make(chan struct{}, total)
	for i := 0; i < total; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if err := oneShot(ctx, e); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// Median returns the median of ds (0 for none).
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// limitedWriter keeps up to 4 KiB, enough for the benchmark's output.
type limitedWriter struct{ b []byte }

func (w *limitedWriter) Write(p []byte) (int, error) {
	if room := 4096 - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
