package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// statusOf is the one table from error kind to HTTP status.
var statusOf = map[kiln.Kind]int{
	kiln.Invalid:         http.StatusBadRequest,
	kiln.Unauthenticated: http.StatusUnauthorized,
	kiln.Forbidden:       http.StatusForbidden,
	kiln.NotFound:        http.StatusNotFound,
	kiln.Conflict:        http.StatusConflict,
	kiln.TooLarge:        http.StatusRequestEntityTooLarge,
	kiln.RateLimited:     http.StatusTooManyRequests,
	kiln.QuotaExceeded:   http.StatusTooManyRequests,
	kiln.Unavailable:     http.StatusServiceUnavailable,
	kiln.Unsupported:     http.StatusNotImplemented,
	kiln.SandboxError:    http.StatusInternalServerError,
	kiln.Internal:        http.StatusInternalServerError,
}

// Codes that are finer than a kind.
const (
	codeQueueFull        = "queue_full"
	codeUnsupportedMedia = "unsupported_media_type"
	codeMethodNotAllowed = "method_not_allowed"
)

// httpError is an error that already knows its status and code: the
// transport's own failures (415, 405) that have no kind.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// retryError asks the client to come back after some seconds.
type retryError struct {
	error
	after int
}

func (e retryError) Unwrap() error { return e.error }

// writeError writes every error answer: application/problem+json with a
// stable code and a message safe to show. Internal errors show a generic
// message with the request id that the log has next to the cause.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	p := problemFor(err)
	if p.Status >= 500 && p.Code != codeQueueFull && p.Code != string(kiln.Unavailable) {
		id := requestID(r)
		log.Error("request failed", "request_id", id, "method", r.Method, "path", r.URL.Path, "err", err)
		p.RequestID = id
		if p.Code == string(kiln.Internal) {
			p.Detail = "internal error; the server's log has the details under request id " + id
		}
	}
	if p.Status == http.StatusRequestTimeout {
		w.Header().Set("Connection", "close") // the rest of the body was never read
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kiln"`)
	}
	if p.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfterSeconds))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p)
}

func problemFor(err error) client.Problem {
	var he *httpError
	if errors.As(err, &he) {
		return problem(he.status, he.code, he.msg)
	}
	kind := kiln.KindOf(err)
	status, ok := statusOf[kind]
	if !ok {
		status = http.StatusInternalServerError
	}
	p := problem(status, string(kind), kiln.Message(err))
	if errors.Is(err, service.ErrQueueFull) {
		p.Code, p.RetryAfterSeconds = codeQueueFull, 1
	}
	var re retryError
	if errors.As(err, &re) {
		p.RetryAfterSeconds = re.after
	}
	if p.Status == http.StatusServiceUnavailable && p.RetryAfterSeconds == 0 {
		p.RetryAfterSeconds = 2 // every 503 says when to come back
	}
	return p
}

func problem(status int, code, detail string) client.Problem {
	return client.Problem{Type: "urn:kiln:problem:" + code, Title: http.StatusText(status), Status: status, Code: code, Detail: detail}
}
