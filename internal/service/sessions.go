package service

import (
	"context"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/store"
)

// SessionSpec is what a client asks for in a new session.
type SessionSpec struct {
	Languages []string
	Limits    kiln.Limits
	IdleTTL   time.Duration      // 0: the service's default
	Network   kiln.NetworkPolicy // "" mode: "none"; within Config.NetworkCeiling unless an admin asks
	Metadata  map[string]string
	// Mounts are host folders under the administrator's MountRoots shown
	// read-only in the sandbox (project code). A Target of "" is
	// /mnt/<the folder's name>.
	Mounts []backend.Mount
	// Environment is the name of a built environment whose packages the
	// session's kernels see (environments.go); "" for none.
	Environment string
	// Resources are extended resources (GPUs) for the sandbox, within
	// what the backend allows (extendedResources).
	Resources map[string]int64
}

// Bounds on session metadata.
const (
	MaxMetadataPairs = 32
	MaxMetadataKey   = 64
	MaxMetadataValue = 512
	maxLanguages     = 16
)

var metadataKey = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Ended-session reasons, kept in the store and shown to users.
const (
	ReasonDeleted = "deleted"
	ReasonIdle    = "idle: no activity for the session's idle TTL"
	ReasonLost    = "workspace lost: it was kept in memory (tmpfs workspaces), which a restart of the machine, or of kiln in a mount namespace of its own (its systemd unit), empties"
)

func (s *Service) checkSpec(u kiln.User, spec *SessionSpec) error {
	if len(spec.Languages) > maxLanguages {
		return kiln.Errorf(kiln.Invalid, "a session may name at most %d languages", maxLanguages)
	}
	if len(spec.Languages) == 0 {
		spec.Languages = []string{"python"}
	}
	for i, name := range spec.Languages {
		l, err := lang.Lookup(name)
		if err != nil {
			return err
		}
		if err := l.Available(); err != nil {
			return err
		}
		spec.Languages[i] = l.Name
	}
	spec.Languages = slices.Compact(spec.Languages)
	if err := spec.Limits.Validate(); err != nil {
		return err
	}
	lim, err := s.capLimits(u, spec.Limits)
	if err != nil {
		return err
	}
	spec.Limits = lim
	if spec.IdleTTL == 0 {
		spec.IdleTTL = s.cfg.IdleTTL
	}
	if err := s.checkIdleTTL(u, spec.IdleTTL); err != nil {
		return err
	}
	if spec.Network, err = s.checkNetwork(u, spec.Network); err != nil {
		return err
	}
	if len(spec.Resources) > 0 {
		if err := backend.CheckResources(spec.Resources, s.extendedResources()); err != nil {
			return err
		}
	}
	return checkMetadata(spec.Metadata)
}

// extendedResources are the extended resources (GPUs) the backend lets a
// sandbox ask for, name → most per sandbox (the Kubernetes backend's
// --k8s-extended-resource); none for a backend without them.
func (s *Service) extendedResources() map[string]int64 {
	if s.engine == nil {
		return nil
	}
	if b, ok := s.engine.Backend().(interface{ ExtendedResources() map[string]int64 }); ok {
		return b.ExtendedResources()
	}
	return nil
}

func checkMetadata(m map[string]string) error {
	if len(m) > MaxMetadataPairs {
		return kiln.Errorf(kiln.Invalid, "metadata may have at most %d keys, not %d", MaxMetadataPairs, len(m))
	}
	for k, v := range m {
		if len(k) > MaxMetadataKey || !metadataKey.MatchString(k) {
			return kiln.Errorf(kiln.Invalid, "metadata key %q must be 1 to %d letters, digits, '_', '.' or '-'", trunc(k, 80), MaxMetadataKey)
		}
		if len(v) > MaxMetadataValue || !utf8.ValidString(v) {
			return kiln.Errorf(kiln.Invalid, "metadata value of %q must be UTF-8 of at most %d bytes", k, MaxMetadataValue)
		}
	}
	return nil
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// CreateSession makes a session for u: from the warm pool when the spec
// allows, else a new sandbox.
func (s *Service) CreateSession(ctx context.Context, u kiln.User, spec SessionSpec) (kiln.Session, error) {
	if err := s.checkSpec(u, &spec); err != nil {
		return kiln.Session{}, err
	}
	mounts, err := s.resolveMounts(spec.Mounts)
	if err != nil {
		return kiln.Session{}, err
	}
	spec.Mounts = mounts
	var layer string
	if spec.Environment != "" {
		if layer, err = s.resolveEnvironment(ctx, spec.Environment); err != nil {
			return kiln.Session{}, err
		}
	}
	lim := spec.Limits.WithDefaults()
	if err := s.checkCapsElsewhere(ctx, u.ID, lim.WorkspaceBytes); err != nil {
		s.metrics.Rejected("quota")
		return kiln.Session{}, err
	}
	release, err := s.reserve(u.ID, lim.WorkspaceBytes)
	if err != nil {
		s.metrics.Rejected("quota")
		return kiln.Session{}, err
	}
	defer release()

	start := time.Now()
	var l *live
	// A pooled sandbox has no mounts.
	pooled := len(mounts) == 0 && len(spec.Resources) == 0 && s.pool.eligible(spec, s.cfg.DefaultLimits) && s.pool.take(func(p *pooled) { l = s.adopt(p, u, spec) })
	if !pooled {
		if l, err = s.freshSession(ctx, u, spec, lim); err != nil {
			s.metrics.SandboxFailure("create")
			return kiln.Session{}, err
		}
	}
	if layer != "" {
		s.useEnvironment(l, spec.Environment, layer)
	}
	rec := l.rec
	if err := s.store.CreateSession(ctx, &rec); err != nil {
		l.end(context.WithoutCancel(ctx), ReasonDeleted)
		s.ws.Remove(rec.ID)
		return kiln.Session{}, err
	}
	l.rec = rec
	s.holdNew(ctx, rec.ID)
	s.mu.Lock()
	s.sessions[rec.ID] = l
	s.mu.Unlock()
	s.metrics.SessionCreated(pooled, time.Since(start))
	s.audit(ctx, store.AuditEntry{UserID: u.ID, Actor: u.ID, Action: "session.create", SessionID: rec.ID, Outcome: "ok",
		Detail: jsonDetail(map[string]any{"languages": rec.Languages, "pooled": pooled})})
	return rec, nil
}

// reserve counts a session being made against u's caps until it is in
// the live map (or failed).
func (s *Service) reserve(userID string, wsBytes int64) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, bytes := s.activeOfLocked(userID)
	n += s.starting[userID]
	if n >= s.cfg.MaxSessionsPerUser {
		return nil, kiln.Errorf(kiln.QuotaExceeded, "you have %d active sessions, the most allowed; end one (DELETE /v1/sessions/{id}) first", n)
	}
	if bytes+wsBytes > s.cfg.MaxWorkspaceBytesPerUser {
		return nil, kiln.Errorf(kiln.QuotaExceeded, "a %s workspace would bring your sessions' workspaces to %s, over your %s; end a session or ask for a smaller workspace",
			kiln.FormatBytes(wsBytes), kiln.FormatBytes(bytes+wsBytes), kiln.FormatBytes(s.cfg.MaxWorkspaceBytesPerUser))
	}
	s.starting[userID]++
	return func() {
		s.mu.Lock()
		if s.starting[userID]--; s.starting[userID] == 0 {
			delete(s.starting, userID)
		}
		s.mu.Unlock()
	}, nil
}

// activeOf counts u's active sessions and their workspace limits.
func (s *Service) activeOf(userID string) (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.activeOfLocked(userID)
}

func (s *Service) activeOfLocked(userID string) (n int, bytes int64) {
	for _, l := range s.sessions {
		if l.rec.UserID == userID {
			n++
			bytes += l.rec.Limits.WithDefaults().WorkspaceBytes
		}
	}
	return n, bytes
}

// freshSession makes a workspace and a sandbox on it.
func (s *Service) freshSession(ctx context.Context, u kiln.User, spec SessionSpec, lim kiln.Limits) (*live, error) {
	id := store.NewID()
	path, err := s.ws.Create(id, lim.WorkspaceBytes, lim.Inodes)
	if err != nil {
		return nil, err
	}
	n, err := s.nets.openNet(id, u.ID, spec.Network)
	if err != nil {
		s.ws.Remove(id)
		return nil, err
	}
	cache := s.buildCacheFor(u, "")
	sess, err := s.engine.NewSession(ctx, engine.SessionSpec{Limits: spec.Limits, HostDir: path, Mounts: s.sandboxMounts(spec.Mounts), EgressSocket: n.socket(), BuildCache: cache, Resources: spec.Resources})
	if err != nil {
		n.close()
		s.ws.Remove(id)
		return nil, err
	}
	now := time.Now()
	rec := kiln.Session{ID: id, UserID: u.ID, Languages: spec.Languages, Limits: spec.Limits,
		Metadata: spec.Metadata, IdleTTL: spec.IdleTTL, Created: now, LastActive: now, SandboxID: sess.ID(), Network: spec.Network,
		Mounts: storedMounts(spec.Mounts), Resources: spec.Resources}
	l := newLive(rec, path, sess)
	l.mounts = s.sandboxMounts(spec.Mounts)
	l.buildCache = cache
	l.net, l.nets, l.policy = n, s.nets, spec.Network
	return l, nil
}

// adopt turns a pooled sandbox into u's session.
func (s *Service) adopt(p *pooled, u kiln.User, spec SessionSpec) *live {
	now := time.Now()
	rec := kiln.Session{ID: p.id, UserID: u.ID, Languages: spec.Languages, Limits: spec.Limits,
		Metadata: spec.Metadata, IdleTTL: spec.IdleTTL, Created: now, LastActive: now, SandboxID: p.sess.ID(), Network: spec.Network}
	p.net.adopt(p.id, u.ID, spec.Network)
	l := newLive(rec, p.path, p.sess)
	l.mounts = s.sandboxMounts(nil)
	l.net, l.nets, l.policy = p.net, s.nets, spec.Network
	return l
}

// Session returns u's session, or a session shared with u, with u's
// role in it.
func (s *Service) Session(ctx context.Context, u kiln.User, id string) (kiln.Session, error) {
	a, err := s.authorize(ctx, u, id, kiln.RoleViewer)
	if err != nil {
		return kiln.Session{}, err
	}
	rec, err := s.store.Session(ctx, a.owner.ID, id)
	if err != nil {
		return rec, err
	}
	rec.Role = a.role
	if l := s.lookup(id); l != nil {
		l.mu.Lock()
		rec.LastActive = l.lastActive
		rec.Network = l.policy
		l.mu.Unlock()
	}
	return rec, nil
}

// ListSessions pages through u's sessions.
func (s *Service) ListSessions(ctx context.Context, u kiln.User, f store.SessionFilter, p store.Page) ([]kiln.Session, string, error) {
	if f.Status != "" && f.Status != kiln.SessionActive && f.Status != kiln.SessionEnded {
		return nil, "", kiln.Errorf(kiln.Invalid, "status %q is not one of: active, ended", f.Status)
	}
	if err := checkMetadata(f.Metadata); err != nil {
		return nil, "", err
	}
	list, next, err := s.store.ListSessions(ctx, u.ID, f, p)
	for i := range list {
		if list[i].Role == "" {
			list[i].Role = kiln.RoleOwner // the store marks only shared ones
		}
		list[i].Network = s.networkOf(list[i])
	}
	return list, next, err
}

func (s *Service) lookup(id string) *live {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// liveFor returns u's active session: ErrNotFound if it is not u's
// (nor shared with u), Forbidden for a user it is shared with, a
// conflict if it has ended. Actions that a shared user may take use
// liveAs (shares.go) with the role they need.
func (s *Service) liveFor(ctx context.Context, u kiln.User, id string) (*live, error) {
	a, err := s.liveAs(ctx, u, id, kiln.RoleOwner)
	return a.l, err
}

// DeleteSession ends u's session: the running cell stops, the sandbox and
// the workspace go; the history stays.
func (s *Service) DeleteSession(ctx context.Context, u kiln.User, id string) error {
	l, err := s.liveFor(ctx, u, id)
	if err != nil {
		return err
	}
	return s.endSession(ctx, l, ReasonDeleted, "deleted")
}

func (s *Service) endSession(ctx context.Context, l *live, reason, metric string) error {
	s.mu.Lock()
	if s.sessions[l.rec.ID] != l {
		s.mu.Unlock()
		return errEnded
	}
	delete(s.sessions, l.rec.ID)
	s.mu.Unlock()
	s.watchers.drop(l.rec.ID, func(*watcher) bool { return true })
	ctx = context.WithoutCancel(ctx)
	l.end(ctx, reason)
	if err := s.ws.Remove(l.rec.ID); err != nil {
		s.log.Error("remove workspace", "session", l.rec.ID, "err", err)
	}
	err := s.store.EndSession(ctx, l.rec.UserID, l.rec.ID, reason, time.Now())
	s.metrics.SessionEnded(metric)
	e := store.AuditEntry{UserID: l.rec.UserID, Action: "session.end", SessionID: l.rec.ID, Outcome: reason}
	if reason == ReasonDeleted {
		e.Actor = l.rec.UserID // only the owner deletes a session
	}
	s.audit(ctx, e)
	return err
}

// Interrupt stops u's session's running cell, if any; kernels keep state.
func (s *Service) Interrupt(ctx context.Context, u kiln.User, id string) error {
	a, err := s.liveAs(ctx, u, id, kiln.RoleCollaborator)
	if err != nil {
		return err
	}
	l := a.l
	l.mu.Lock()
	sess := l.sess
	l.mu.Unlock()
	if sess != nil {
		if err := sess.Interrupt(); err != nil {
			return kiln.Wrap(kiln.SandboxError, err, "could not interrupt the session")
		}
	}
	s.audit(ctx, store.AuditEntry{UserID: a.owner.ID, Actor: u.ID, Action: "session.interrupt", SessionID: id, Outcome: "ok"})
	return nil
}

// Restart clears the kernel state of one language ("" for all) of u's
// session; the files stay.
func (s *Service) Restart(ctx context.Context, u kiln.User, id, language string) error {
	a, err := s.liveAs(ctx, u, id, kiln.RoleCollaborator)
	if err != nil {
		return err
	}
	l := a.l
	release := l.hold()
	defer release()
	sess, err := l.sandbox(ctx, s.engine)
	if err != nil {
		return err
	}
	if err := sess.Restart(ctx, language); err != nil {
		return err
	}
	s.audit(ctx, store.AuditEntry{UserID: a.owner.ID, Actor: u.ID, Action: "session.restart", SessionID: id, Outcome: "ok",
		Detail: jsonDetail(map[string]any{"language": language})})
	return nil
}
