package kiln

import (
	"errors"
	"fmt"
)

// Kind is a stable class of error. Kinds map to exit codes and, later, to HTTP
// statuses in exactly one table each.
type Kind string

const (
	Invalid      Kind = "invalid"       // the request is wrong; the message says how
	NotFound     Kind = "not_found"     // no such thing (or not yours)
	Unsupported  Kind = "unsupported"   // the host lacks something kiln needs
	TooLarge     Kind = "too_large"     // code, a file or a body over its limit
	Unavailable  Kind = "unavailable"   // try again later: capacity, queue
	Internal     Kind = "internal"      // a bug or a host failure; details in the log
	SandboxError Kind = "sandbox_error" // the sandbox could not be made or broke

	Unauthenticated Kind = "unauthenticated" // no credentials, or ones kiln does not know
	Forbidden       Kind = "forbidden"       // known caller, not allowed (admin-only actions)
	Conflict        Kind = "conflict"        // collides with existing state
	RateLimited     Kind = "rate_limited"    // too many requests; retry later
	QuotaExceeded   Kind = "quota_exceeded"  // a per-user cap is reached
)

// Error is an error with a kind and a message that is safe to show a user.
// Cause is for logs and errors.Is; it never reaches a user.
type Error struct {
	Kind    Kind
	Message string
	Cause   error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// Errorf makes an Error of the given kind with a formatted user message.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Wrap makes an Error of the given kind that keeps cause for the log.
func Wrap(kind Kind, cause error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), Cause: cause}
}

// KindOf returns the kind of err, or Internal when err carries none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Message returns the user-safe message of err.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
