package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The side-by-side report names every figure, gives docker's ratio to
// native and the two targets' ratios from the medians.
func TestBackendsPrint(t *testing.T) {
	ms := func(f float64) Stat { return Stat{Median: time.Duration(f * float64(time.Millisecond))} }
	r := &BackendsReport{
		Opts:  BackendsOptions{Runs: 5, Cells: 50, PoolSize: 2, Concurrency: 8, PlainName: "docker run", Plain: func(context.Context) (string, error) { return "1\n", nil }},
		Bare:  ms(10),
		Plain: ms(300),
		Backends: []BackendFigures{
			{Name: "native", RunPooled: ms(3), ReadyPooled: ms(5), Warm: ms(1), PerSec: 30},
			{Name: "docker", RunPooled: ms(6), ReadyPooled: ms(7.5), Warm: ms(2), PerSec: 10},
		},
	}
	var b bytes.Buffer
	r.Print(&b)
	got := strings.Join(strings.Fields(b.String()), " ") // columns' widths aside
	for _, want := range []string{
		"docker/native",
		"one-shot python print(1), from the pool 3.00 ms 6.00 ms 2.00x",
		"warm python 1+1 via HTTP 1.00 ms 2.00 ms 2.00x",
		"30.0/s",
		"docker one-shot from the pool is 50.0x faster than the plain container",
		"docker pooled session (create + first 1+1) is 1.50x native's",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
}

func TestBackendsOptionsChecked(t *testing.T) {
	_, err := Backends(context.Background(), []Named{{Name: "x"}}, BackendsOptions{Runs: 1, Cells: 1, Throughput: 1, Concurrency: 1}, nil)
	if err == nil || !strings.Contains(err.Error(), "pool size") {
		t.Errorf("pool size 0: %v; want an error naming the pool size", err)
	}
}
