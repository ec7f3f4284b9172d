package service

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// MaxSessionName is the longest session name, in characters.
const MaxSessionName = 100

// metadataSetter is the store's ability to change one metadata pair of a
// session (store.DB has it); found by type assertion, so that the
// Store interface stays what every caller needs.
type metadataSetter interface {
	SetSessionMetadata(ctx context.Context, userID, id, key, value string) error
}

// RenameSession sets the name of u's session (its metadata "name"; ""
// removes it). Only the owner may rename. The name is trimmed; it must be
// at most MaxSessionName characters of printable UTF-8.
func (s *Service) RenameSession(ctx context.Context, u kiln.User, id, name string) (kiln.Session, error) {
	name = strings.TrimSpace(name)
	if err := checkSessionName(name); err != nil {
		return kiln.Session{}, err
	}
	a, err := s.authorize(ctx, u, id, kiln.RoleOwner)
	if err != nil {
		return kiln.Session{}, err
	}
	set, ok := s.store.(metadataSetter)
	if !ok {
		return kiln.Session{}, kiln.Errorf(kiln.Internal, "this store cannot rename sessions")
	}
	if err := set.SetSessionMetadata(ctx, a.owner.ID, id, "name", name); err != nil {
		return kiln.Session{}, err
	}
	s.audit(ctx, store.AuditEntry{UserID: a.owner.ID, Actor: u.ID, Action: "session.rename", SessionID: id, Outcome: "ok",
		Detail: jsonDetail(map[string]string{"name": name})})
	return s.Session(ctx, u, id)
}

func checkSessionName(name string) error {
	if !utf8.ValidString(name) {
		return kiln.Errorf(kiln.Invalid, "the session name is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(name); n > MaxSessionName {
		return kiln.Errorf(kiln.Invalid, "the session name is %d characters; at most %d are allowed", n, MaxSessionName)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) && r != ' ' {
			return kiln.Errorf(kiln.Invalid, "the session name contains the control or invisible character %U; use letters, digits, punctuation and spaces", r)
		}
	}
	return nil
}

// SessionUse is what an active session uses now.
type SessionUse struct {
	WorkspaceBytes      int64         // used in the workspace
	WorkspaceLimitBytes int64         // the workspace's size
	Busy                bool          // running a cell, a stream or a file operation: the idle clock is stopped
	IdleLeft            time.Duration // until the idle time-out ends it, counted from its last activity
	// CPUTime and PeakMemoryBytes are what the session's user code used
	// in its current sandbox, where the backend measures it (native's
	// cgroups); Measured says they are there.
	Measured        bool
	CPUTime         time.Duration
	PeakMemoryBytes int64
}

// usageReporter is a backend that reads a sandbox's cgroup (native).
type usageReporter interface {
	SandboxUsage(ctx context.Context, id string) (cpu time.Duration, peakMemory int64, err error)
}

// SessionUse reports what session id, active in this process, uses;
// false when it is not active here. The caller has already authorized
// (it lists or got the session). A workspace whose usage cannot be read
// reports 0 bytes used.
func (s *Service) SessionUse(ctx context.Context, id string, now time.Time) (SessionUse, bool) {
	l := s.lookup(id)
	if l == nil {
		return SessionUse{}, false
	}
	since, idle := l.idleSince()
	u := SessionUse{Busy: !idle, IdleLeft: l.rec.IdleTTL}
	if idle {
		u.IdleLeft = max(0, l.rec.IdleTTL-now.Sub(since))
	}
	// A plain workspace (tests) has no size of its own: the limit then.
	u.WorkspaceLimitBytes = l.rec.Limits.WithDefaults().WorkspaceBytes
	if used, size, err := s.ws.Usage(id); err == nil {
		u.WorkspaceBytes = used
		if size > 0 {
			u.WorkspaceLimitBytes = size
		}
	}
	l.mu.Lock()
	sess := l.sess
	l.mu.Unlock()
	if r, ok := s.engine.Backend().(usageReporter); ok && sess != nil {
		if cpu, peak, err := r.SandboxUsage(ctx, sess.ID()); err == nil {
			u.Measured, u.CPUTime, u.PeakMemoryBytes = true, cpu, peak
		}
	}
	return u, true
}
