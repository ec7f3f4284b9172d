package bench

import (
	"context"
	"testing"
)

// BenchmarkHealthHTTP is GET /v1/health/live through the same harness as
// BenchmarkWarmCellHTTP: the HTTP round trip with no store and no
// sandbox, the baseline to hold a warm cell's time against in one run:
//
//	go test -run XXX -bench 'WarmCellHTTP|HealthHTTP' -count 6 ./internal/bench/
func BenchmarkHealthHTTP(b *testing.B) {
	h := benchService(b)
	defer h.close()
	ctx := context.Background()
	for b.Loop() {
		if err := h.user.Health(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
