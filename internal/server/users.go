package server

import (
	"net/http"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store"
)

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.UserRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	u, err := s.svc.CreateUser(r.Context(), c.user, req.Name, req.Admin)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, fromUser(u))
}

func (s *Server) users(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := page(r)
	if err != nil {
		return err
	}
	var all []client.User
	for {
		list, next, err := s.svc.Users(r.Context(), c.user, p)
		if err != nil {
			return err
		}
		for _, u := range list {
			all = append(all, fromUser(u))
		}
		if next == "" || len(all) >= store.MaxLimit {
			break
		}
		p.Cursor = next
	}
	if all == nil {
		all = []client.User{}
	}
	return writeJSON(w, http.StatusOK, all)
}

func (s *Server) user(w http.ResponseWriter, r *http.Request, c *call) error {
	u, err := s.svc.User(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromUser(u))
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.KeyRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
			return err
		}
	}
	expires, err := keyExpiry(req, time.Now())
	if err != nil {
		return err
	}
	k, err := s.svc.CreateKey(r.Context(), c.user, r.PathValue("id"), req.Name, service.KeyOptions{Expires: expires, Scope: req.Scope})
	if err != nil {
		return err
	}
	out := fromKey(k.APIKey)
	out.Secret = k.Secret()
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, out)
}

// maxKeyLifetime bounds an expiry, so that a typo in seconds does not
// overflow a time.
const maxKeyLifetime = 100 * 365 * 24 * time.Hour

// keyExpiry is the expiry a key request asks for: zero for none.
func keyExpiry(req client.KeyRequest, now time.Time) (time.Time, error) {
	switch {
	case req.ExpiresInSeconds != 0 && req.ExpiresAt != nil:
		return time.Time{}, kiln.Errorf(kiln.Invalid, "give expires_in_seconds or expires_at, not both")
	case req.ExpiresInSeconds < 0 || req.ExpiresInSeconds > int64(maxKeyLifetime/time.Second):
		return time.Time{}, kiln.Errorf(kiln.Invalid, "expires_in_seconds must be from 1 to %d (100 years), not %d", int64(maxKeyLifetime/time.Second), req.ExpiresInSeconds)
	case req.ExpiresInSeconds > 0:
		return now.Add(time.Duration(req.ExpiresInSeconds) * time.Second), nil
	case req.ExpiresAt != nil && !req.ExpiresAt.After(now):
		return time.Time{}, kiln.Errorf(kiln.Invalid, "expires_at %s is not in the future", req.ExpiresAt.UTC().Format(time.RFC3339))
	case req.ExpiresAt != nil && req.ExpiresAt.Sub(now) > maxKeyLifetime:
		return time.Time{}, kiln.Errorf(kiln.Invalid, "expires_at %s is more than 100 years ahead", req.ExpiresAt.UTC().Format(time.RFC3339))
	case req.ExpiresAt != nil:
		return *req.ExpiresAt, nil
	}
	return time.Time{}, nil
}

func (s *Server) keys(w http.ResponseWriter, r *http.Request, c *call) error {
	list, err := s.svc.Keys(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := make([]client.Key, 0, len(list))
	for _, k := range list {
		out = append(out, fromKey(k))
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.svc.RevokeKey(r.Context(), c.user, r.PathValue("id"), r.PathValue("key")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) audit(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := page(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	list, next, err := s.svc.Audit(r.Context(), c.user, store.AuditFilter{UserID: q.Get("user"), SessionID: q.Get("session"), Actor: q.Get("actor")}, p)
	if err != nil {
		return err
	}
	out := client.AuditList{Entries: make([]client.AuditEntry, 0, len(list)), NextCursor: next}
	for _, e := range list {
		out.Entries = append(out.Entries, client.AuditEntry{ID: e.ID, Time: e.Time, UserID: e.UserID, Action: e.Action,
			SessionID: e.SessionID, ExecutionID: e.ExecutionID, CodeHash: e.CodeHash, Outcome: e.Outcome, Detail: e.Detail, Actor: e.Actor})
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) usage(w http.ResponseWriter, r *http.Request, c *call) error {
	u, err := s.svc.Usage(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	quota := func(q service.Quota) client.Quota { return client.Quota{Used: q.Used, Limit: q.Limit} }
	return writeJSON(w, http.StatusOK, client.UserUsage{UserID: u.UserID, Sessions: quota(u.Sessions),
		WorkspaceBytes: quota(u.WorkspaceBytes), CPUSecondsToday: quota(u.CPUSeconds), Renews: u.Renews,
		DefaultLimits: fromLimits(u.DefaultLimits), MaxLimits: fromLimits(u.MaxLimits), MaxIdleTTLSeconds: int64(u.MaxIdleTTL / time.Second)})
}
