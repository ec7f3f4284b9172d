package server

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// rateLimits is a token bucket per API key. Buckets unused for a while
// are dropped so that the map stays as small as the set of active keys.
type rateLimits struct {
	per   rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

func newRateLimits(perSecond float64, burst int) *rateLimits {
	return &rateLimits{per: rate.Limit(perSecond), burst: burst, buckets: map[string]*bucket{}, swept: time.Now()}
}

// allow takes one token from the key's bucket, or answers how long to wait.
func (r *rateLimits) allow(key string) error {
	now := time.Now()
	r.mu.Lock()
	b := r.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(r.per, r.burst)}
		r.buckets[key] = b
	}
	b.used = now
	if now.Sub(r.swept) > time.Minute {
		for k, v := range r.buckets {
			if now.Sub(v.used) > 10*time.Minute {
				delete(r.buckets, k)
			}
		}
		r.swept = now
	}
	r.mu.Unlock()
	res := b.lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return retryError{kiln.Errorf(kiln.RateLimited, "too many requests for this API key (%g per second, bursts of %d); retry after %v", float64(r.per), r.burst, d.Round(time.Millisecond)),
			int(math.Ceil(d.Seconds()))}
	}
	return nil
}
