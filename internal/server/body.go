package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// codeRequestTimeout is the problem code of a body that came too slowly.
const codeRequestTimeout = "request_timeout"

// slowBody bounds the time to read a request body by a minimum data
// rate, as a connection deadline that moves on with every byte: after a
// grace period the body must have come at BodyMinRate bytes a second on
// average. A client that trickles a body (or stops sending) is cut off
// with 408, while a large upload on a slow but steady link goes through.
// The deadline is lifted when the body ends, so that a long cell after
// its request has been read is never cut.
type slowBody struct {
	body   io.ReadCloser
	rc     *http.ResponseController
	start  time.Time
	grace  time.Duration
	rate   int64 // bytes per second
	n      int64
	ended  bool
	tooBad *httpError
}

func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	r.Body = &slowBody{body: r.Body, rc: http.NewResponseController(w), start: time.Now(),
		grace: s.cfg.BodyGrace, rate: s.cfg.BodyMinRate, tooBad: s.errSlowBody}
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.ended {
		return b.body.Read(p)
	}
	deadline := b.start.Add(b.grace + time.Duration(float64(b.n)/float64(b.rate)*float64(time.Second)))
	b.rc.SetReadDeadline(deadline) // a transport without deadlines is not bounded here
	n, err := b.body.Read(p)
	b.n += int64(n)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.ended = true
		return n, b.tooBad
	case err != nil:
		b.ended = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (b *slowBody) Close() error { return b.body.Close() }

func slowBodyError(grace time.Duration, rate int64) *httpError {
	return &httpError{http.StatusRequestTimeout, codeRequestTimeout,
		fmt.Sprintf("the request body came too slowly: after the first %v it must arrive at %s a second or more; the rest was not read",
			grace, kiln.FormatBytes(rate))}
}
