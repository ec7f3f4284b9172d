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
	"github.com/kiln-dev/kiln/internal/kiln"
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
		kilnRates = append(kilnRates, batchRate(t, ts, u, items))
		hostRates = append(hostRates, hostRate(n, conc, func(i int) error {
			if out, err := exec.Command("/usr/bin/python3", filepath.Join(dir, fmt.Sprintf("%d.py", i))).CombinedOutput(); err != nil {
				return fmt.Errorf("host item %d: %v %s", i, err, out)
			}
			return nil
		}))
	}
	km, hm := median(kilnRates), median(hostRates)
	t.Logf("%d Python print-and-assert items, %d at once, median of %d rounds: kiln batch %.1f items/s, host python3 %.1f items/s (kiln/host %.2f)",
		n, conc, rounds, km, hm, km/hm)
}

// batchRate runs items as one batch, fails the test unless every item
// passed, and returns the batch's items per second.
func batchRate(t *testing.T, ts *testService, u kiln.User, items []batch.Item) float64 {
	t.Helper()
	start := time.Now()
	_, w, err := ts.CreateBatch(ctxT(t, 10*time.Minute), u, BatchRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	got := collectBatch(t, w)
	for i := range items {
		if !got[i].Passed {
			t.Fatalf("item %d (%s): %+v", i, items[i].Language, got[i])
		}
	}
	return float64(len(items)) / time.Since(start).Seconds()
}

// hostRate runs item(0..n-1) on the host, conc at once, and returns items
// per second; a failing item panics: a baseline that fails measures nothing.
func hostRate(n, conc int, item func(int) error) float64 {
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := item(i); err != nil {
					panic(err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestBatchThroughputCompiled measures batch throughput of compiled items,
// C++ and Rust, each twice: with distinct sources (every item builds) and
// with one source repeated (the first build of each key is published to
// the user's build cache, and the items after it run the cached binary).
// The host baseline builds and runs each distinct program directly with
// the same compiler flags, as many at once as the batch. It only
// measures; docs/PERFORMANCE.md has its figures.
func TestBatchThroughputCompiled(t *testing.T) {
	ts := newNativeService(t, Config{Workspaces: "tmpfs"})
	u := ts.user(t, "bench", false)
	const n = 24
	conc := ts.cfg.UserConcurrency
	langs := []struct {
		name, ext string
		src       func(i int) string
		build     func(src, bin string) []string
	}{
		{"cpp", "cpp", func(i int) string {
			return fmt.Sprintf("#include <iostream>\n#include <vector>\nint main() { std::vector<long> v(%d, 3); long s = 0; for (long x : v) s += x; std::cout << s << \"\\n\"; }\n", i+1)
		}, func(src, bin string) []string {
			return []string{"/usr/bin/g++", "-std=gnu++20", "-O2", "-Wall", "-pipe", "-o", bin, src}
		}},
		{"rust", "rs", func(i int) string {
			return fmt.Sprintf("fn main() { let v = vec![3i64; %d]; println!(\"{}\", v.iter().sum::<i64>()); }\n", i+1)
		}, func(src, bin string) []string {
			return []string{"/usr/bin/rustc", "--edition", "2021", "-O", "-C", "overflow-checks=on", "-C", "strip=debuginfo", "-o", bin, src}
		}},
	}
	for _, l := range langs {
		if _, err := exec.LookPath(l.build("", "")[0]); err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		for _, repeated := range []bool{false, true} {
			items := make([]batch.Item, n)
			for i := range items {
				k := i
				if repeated {
					k = 1000 // a source no distinct round used: the first item builds it
				}
				want := fmt.Sprintf("%d\n", 3*(k+1))
				items[i] = batch.Item{Language: l.name, Code: l.src(k), Check: batch.Check{Stdout: &want}}
			}
			rate := batchRate(t, ts, u, items)
			t.Logf("%s, %d items, %d at once, %s: kiln batch %.2f items/s", l.name, n, conc, map[bool]string{false: "distinct sources", true: "one source repeated"}[repeated], rate)
		}
		dir := t.TempDir()
		rate := hostRate(n, conc, func(i int) error {
			src := filepath.Join(dir, fmt.Sprintf("%d.%s", i, l.ext))
			bin := filepath.Join(dir, fmt.Sprint(i))
			if err := os.WriteFile(src, []byte(l.src(i+2000)), 0o644); err != nil {
				return err
			}
			argv := l.build(src, bin)
			if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("host build %d: %v %s", i, err, out)
			}
			if out, err := exec.Command(bin).CombinedOutput(); err != nil {
				return fmt.Errorf("host run %d: %v %s", i, err, out)
			}
			return nil
		})
		t.Logf("%s, %d items, %d at once: host build and run %.2f items/s", l.name, n, conc, rate)
	}
}
