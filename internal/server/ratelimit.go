package server

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// rateLimits is a token bucket per name: an API key, a user, a client
// address. Buckets unused for a while are dropped so that the map stays
// as small as the set of active names.
type rateLimits struct {
	per   rate.Limit
	burst int
	// shared, with several replicas on one PostgreSQL, keeps allow's
	// buckets in the database, so that the replicas together allow a key
	// and a user their rate once; nil (SQLite, one replica): in memory.
	shared SharedRate

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

func (r *rateLimits) limiter(name string, now time.Time) *rate.Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[name]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(r.per, r.burst)}
		r.buckets[name] = b
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
	return b.lim
}

// take takes one token from every named bucket, or from none and answers
// how long to wait. Taking from all or none means that a refused request
// costs nothing, so a key that is refused for its user's sake does not
// drain its own bucket.
func (r *rateLimits) take(now time.Time, names ...string) time.Duration {
	res := make([]*rate.Reservation, 0, len(names))
	var wait time.Duration
	for _, n := range names {
		rv := r.limiter(n, now).ReserveN(now, 1)
		res = append(res, rv)
		wait = max(wait, rv.DelayFrom(now))
	}
	if wait > 0 {
		for _, rv := range res {
			rv.CancelAt(now)
		}
	}
	return wait
}

// SharedRate keeps token buckets every replica takes from
// (postgres.Replicas): TakeTokens takes one token from each named bucket
// or from none, and says how long to wait.
type SharedRate interface {
	TakeTokens(ctx context.Context, names []string, perSecond float64, burst int) (time.Duration, error)
}

// sharedRateTimeout bounds the database's answer for a request's tokens.
const sharedRateTimeout = 2 * time.Second

// allow applies the request limits: one bucket per API key and one per
// user, so that a user who makes many keys gets no more than with one.
// With replicas the buckets are shared; when the database does not
// answer, this replica's own buckets apply meanwhile.
func (r *rateLimits) allow(userID, keyID string) error {
	names := []string{"user:" + userID, "key:" + keyID}
	var d time.Duration
	if r.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedRateTimeout)
		var err error
		d, err = r.shared.TakeTokens(ctx, names, float64(r.per), r.burst)
		cancel()
		if err != nil {
			d = r.take(time.Now(), names...)
		}
	} else {
		d = r.take(time.Now(), names...)
	}
	if d > 0 {
		return retryError{kiln.Errorf(kiln.RateLimited, "too many requests for this user (%g per second, bursts of %d, for all of its API keys together); retry after %v", float64(r.per), r.burst, d.Round(time.Millisecond)),
			retrySeconds(d)}
	}
	return nil
}

// authFailures limits failed authentications per client address, so that
// keys cannot be guessed at the speed of the network. A failure takes a
// token; a request is refused before authenticating while its address
// has none left.
type authFailures struct{ *rateLimits }

func newAuthFailures(perMinute float64, burst int) authFailures {
	return authFailures{newRateLimits(perMinute/60, burst)}
}

// check refuses an address with no tokens left, without taking one.
func (a authFailures) check(addr string) error {
	now := time.Now()
	lim := a.limiter(addr, now)
	if lim.TokensAt(now) >= 1 {
		return nil
	}
	rv := lim.ReserveN(now, 1)
	d := rv.DelayFrom(now)
	rv.CancelAt(now)
	return retryError{kiln.Errorf(kiln.RateLimited, "too many failed authentications from %s (%g a minute, bursts of %d); retry after %v with a valid API key",
		addr, float64(a.per)*60, a.burst, d.Round(time.Second)), retrySeconds(d)}
}

// failed records a failed authentication from addr.
func (a authFailures) failed(addr string) {
	now := time.Now()
	a.limiter(addr, now).ReserveN(now, 1) // may go into debt: repeated failures wait longer
}

func retrySeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }
