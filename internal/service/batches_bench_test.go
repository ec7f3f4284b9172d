//go:build bench

package service

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/batch"
)

// TestBatchThroughput measures batch throughput (items/s) of Python
// print-and-assert items at the default concurrency, against the host
// running the same programs directly (one python3 process each, as many
// at once), medians of rounds in the same run. It only measures: run it
// with go test -tags bench -run TestBatchThroughput as root; docs/PERFORMANCE.md has its figures.
func TestBatchThroughput(t *testing.T) {
	ts := newNativeService(t, Config{Workspaces: "tmpfs"})
	u := ts.user(t, "bench", false)
	const n, rounds = 200, 5
	items := make([]batch.Item, n)
	for i := range items {
		code := fmt.Sprintf("def double(x):\n    return 2 * x\n\nprint(double(%d))", i)
		items[i] = batch.Item{Language: "python", Code: code, Check: batch.Check{Test: fmt.Sprintf("assert double(%d) == %d", i, 2*i)}}
	}
	conc := ts.cfg.UserConcurrency
	dir := t.TempDir()
	for i, it := range items {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.py", i)), []byte(batch.ProgramOf(it).Code+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var kilnRates, hostRates []float64
	for range rounds {
		start := time.Now()
		_, w, err := ts.CreateBatch(ctxT(t, 10*time.Minute), u, BatchRequest{Items: items})
		if err != nil {
			t.Fatal(err)
		}
		got := collectBatch(t, w)
		for i := range n {
			if !got[i].Passed {
				t.Fatalf("item %d: %+v", i, got[i])
			}
		}
		kilnRates = append(kilnRates, float64(n)/time.Since(start).Seconds())

		start = time.Now()
		next := make(chan int)
		var wg sync.WaitGroup
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if out, err := exec.Command("python3", filepath.Join(dir, fmt.Sprintf("%d.py", i))).CombinedOutput(); err != nil {
						t.Errorf("host item %d: %v %s", i, err, out)
					}
				}
			}()
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		hostRates = append(hostRates, float64(n)/time.Since(start).Seconds())
	}
	km, hm := median(kilnRates), median(hostRates)
	t.Logf("%d Python print-and-assert items, %d at once, median of %d rounds: kiln batch %.1f items/s, host python3 %.1f items/s (kiln/host %.2f)",
		n, conc, rounds, km, hm, km/hm)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
