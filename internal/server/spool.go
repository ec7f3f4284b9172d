package server

import (
	"errors"
	"io"
	"sync"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// spoolRetryAfter is the Retry-After when the archive spool is full: the
// uploads holding it take a while.
const spoolRetryAfter = 10

// spoolBudget bounds the bytes of archive uploads spooled to disk at
// once (an archive is read whole before it is unpacked, outside any
// workspace quota): per user, so that one user cannot take it all, and in
// total, so that the disk holding the spool is safe.
type spoolBudget struct {
	maxUser, maxTotal int64

	mu    sync.Mutex
	total int64
	users map[string]int64
}

func newSpoolBudget(maxUser, maxTotal int64) *spoolBudget {
	return &spoolBudget{maxUser: maxUser, maxTotal: maxTotal, users: map[string]int64{}}
}

// take counts n more bytes of user's, or refuses them and counts none.
func (b *spoolBudget) take(user string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u := b.users[user]; u+n > b.maxUser {
		return retryError{spoolFull{kiln.Errorf(kiln.QuotaExceeded, "your archive uploads being received are over the %s each user may have at once; upload one archive at a time, or smaller ones",
			kiln.FormatBytes(b.maxUser))}, spoolRetryAfter}
	}
	if b.total+n > b.maxTotal {
		return retryError{spoolFull{kiln.Errorf(kiln.Unavailable, "the server is receiving %s of archive uploads, its limit; retry in a while", kiln.FormatBytes(b.maxTotal))},
			spoolRetryAfter}
	}
	b.users[user] += n
	b.total += n
	return nil
}

func (b *spoolBudget) give(user string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if b.users[user] -= n; b.users[user] <= 0 {
		delete(b.users, user)
	}
}

// spooled counts the bytes read through it against the budget until
// release.
type spooled struct {
	r    io.Reader
	b    *spoolBudget
	user string
	n    int64
}

func (b *spoolBudget) reader(user string, r io.Reader) *spooled {
	return &spooled{r: r, b: b, user: user}
}

func (s *spooled) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		if terr := s.b.take(s.user, int64(n)); terr != nil {
			return 0, terr
		}
		s.n += int64(n)
	}
	return n, err
}

// release gives back what was counted: the spool file is gone.
func (s *spooled) release() {
	s.b.give(s.user, s.n)
	s.n = 0
}

// spoolFull marks a refusal of the spool, for the metrics.
type spoolFull struct{ err *kiln.Error }

func (e spoolFull) Error() string { return e.err.Error() }
func (e spoolFull) Unwrap() error { return e.err }

func isSpoolFull(err error) bool {
	var sf spoolFull
	return errors.As(err, &sf)
}
