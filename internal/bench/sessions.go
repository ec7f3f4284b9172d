package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kernels"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// SessionReport holds the session figures: medians.
type SessionReport struct {
	Runs         int
	Ready        time.Duration            // a Python session from nothing: sandbox + kernel + first `1+1`
	ReadySource  time.Duration            // the same with the kernel compiled from its source at boot (before precompiling)
	Bare         time.Duration            // bare python3 -c 'print(1)' on the host, in the same loop (baseline)
	Warm         map[string]time.Duration // a warm `1+1` cell per language, at the engine API
	ProgramFirst map[string]time.Duration // hello world compiled and run, per program language
	ProgramAgain map[string]time.Duration // the same again, from the compile cache
}

// warmCode is the trivial cell per REPL language.
var warmCode = map[string]string{"python": "1+1", "javascript": "1+1"}

// helloC is the C program of the compile-and-run figure.
const helloC = "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n"

// Sessions measures session figures with e.
func Sessions(ctx context.Context, e *engine.Engine, runs int, log io.Writer) (*SessionReport, error) {
	r := &SessionReport{Runs: runs, Warm: map[string]time.Duration{}, ProgramFirst: map[string]time.Duration{}, ProgramAgain: map[string]time.Duration{}}
	// Interleaved: the kernel booting from its precompiled code, from its
	// source, and a bare python3 on the host.
	var ready, fromSource, bare []time.Duration
	defer kernels.Precompile(true)
	for i := 0; i < runs; i++ {
		for _, precompiled := range []bool{true, false} {
			kernels.Precompile(precompiled)
			d, err := readyFromNothing(ctx, e)
			if err != nil {
				return nil, err
			}
			if precompiled {
				ready = append(ready, d)
			} else {
				fromSource = append(fromSource, d)
			}
		}
		d, err := timed(func() error { return exec.CommandContext(ctx, "/usr/bin/python3", "-c", program).Run() })
		if err != nil {
			return nil, fmt.Errorf("bare python3: %w", err)
		}
		bare = append(bare, d)
	}
	kernels.Precompile(true)
	r.Ready, r.ReadySource, r.Bare = Median(ready), Median(fromSource), Median(bare)
	fmt.Fprintln(log, "session ready done")

	s, err := e.NewSession(ctx, engine.SessionSpec{})
	if err != nil {
		return nil, err
	}
	defer s.Close(ctx)
	for language, code := range warmCode {
		if err := expect(ctx, s, language, code, "2"); err != nil {
			return nil, fmt.Errorf("%s: %w", language, err)
		}
		var ds []time.Duration
		for i := 0; i < runs*10; i++ {
			start := time.Now()
			if err := expect(ctx, s, language, code, "2"); err != nil {
				return nil, err
			}
			ds = append(ds, time.Since(start))
		}
		r.Warm[language] = Median(ds)
		fmt.Fprintf(log, "warm %s cells done\n", language)
	}
	// C: a new program each time (a comment makes it differ) against the
	// same program again, which the build cache serves.
	var first, again []time.Duration
	for i := 0; i < runs; i++ {
		code := fmt.Sprintf("/* %d */\n%s", i, helloC)
		for _, ds := range []*[]time.Duration{&first, &again} {
			start := time.Now()
			res, err := s.Run(ctx, engine.Cell{Language: "c", Code: code}, engine.Events{})
			if err != nil || res.Stdout != "hello\n" {
				return nil, fmt.Errorf("c hello world: %q, %v", res.Stdout, err)
			}
			*ds = append(*ds, time.Since(start))
		}
	}
	r.ProgramFirst["c"], r.ProgramAgain["c"] = Median(first), Median(again)
	fmt.Fprintln(log, "c hello world done")
	return r, nil
}

// readyFromNothing times a new session until its first `1+1` has
// answered; the session is closed untimed.
func readyFromNothing(ctx context.Context, e *engine.Engine) (time.Duration, error) {
	start := time.Now()
	s, err := e.NewSession(ctx, engine.SessionSpec{})
	if err != nil {
		return 0, err
	}
	defer s.Close(ctx)
	if err := expect(ctx, s, "python", "1+1", "2"); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// expect runs a cell and checks its result's text.
func expect(ctx context.Context, s *engine.Session, language, code, want string) error {
	res, err := s.Run(ctx, engine.Cell{Language: language, Code: code}, engine.Events{})
	if err != nil {
		return err
	}
	got := ""
	for _, o := range res.Outputs {
		if o.Result {
			got = engine.Text(o)
		}
	}
	if res.Status != kiln.StatusOK || got != want {
		return fmt.Errorf("%s cell %q: status %s, result %q, stderr %q", language, code, res.Status, got, res.Stderr)
	}
	return nil
}

// Print writes the session figures.
func (r *SessionReport) Print(w io.Writer) {
	fmt.Fprintf(w, "sessions, medians (%d sessions; %d warm cells per language):\n", r.Runs, r.Runs*10)
	fmt.Fprintf(w, "  python session ready from nothing (sandbox + kernel + first 1+1)  %8.2f ms, %.2fx bare python3 (%.2f ms)\n", ms(r.Ready), ratio(r.Ready, r.Bare), ms(r.Bare))
	fmt.Fprintf(w, "    the same, kernel compiled from its source at boot                %8.2f ms, %.2fx bare\n", ms(r.ReadySource), ratio(r.ReadySource, r.Bare))
	for _, l := range []string{"python", "javascript"} {
		if d, ok := r.Warm[l]; ok {
			fmt.Fprintf(w, "  warm %-10s 1+1 cell round trip at the engine API      %8.3f ms\n", l, ms(d))
		}
	}
	for l, d := range r.ProgramFirst {
		fmt.Fprintf(w, "  %s hello world, compile + run  %8.2f ms; again from the cache %8.2f ms\n", l, ms(d), ms(r.ProgramAgain[l]))
	}
}
