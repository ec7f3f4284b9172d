package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// storeRetryAfter is the Retry-After of an answer during a store outage:
// long enough not to hammer a database that is restarting.
const storeRetryAfter = 5

// storeOutage turns an unexplained failure into 503 unavailable with
// Retry-After when the store does not answer: the client should come
// back, not report a bug. The store's own errors carry no kind, so the
// store is asked directly (a cheap read) rather than guessing from a
// driver's error text. database/sql reconnects by itself, so nothing has
// to be reset when the database is back.
func (s *Server) storeOutage(r *http.Request, err error) error {
	if kiln.KindOf(err) != kiln.Internal || errors.Is(err, context.Canceled) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	if s.svc.Ready(ctx) == nil {
		return err
	}
	s.log.Warn("store unavailable", "request_id", requestID(r), "method", r.Method, "route", r.Pattern, "err", err)
	return retryError{kiln.Wrap(kiln.Unavailable, err, "kiln's database does not answer; retry in a few seconds"), storeRetryAfter}
}
