package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store"
)

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.SessionRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	if req.IdleTTLSeconds < 0 {
		return kiln.Errorf(kiln.Invalid, "idle_ttl_seconds must not be negative")
	}
	if req.IdleTTLSeconds > int64(365*24*time.Hour/time.Second) {
		return kiln.Errorf(kiln.Invalid, "idle_ttl_seconds %d is too long", req.IdleTTLSeconds)
	}
	rec, err := s.svc.CreateSession(r.Context(), c.user, service.SessionSpec{
		Languages: req.Languages, Limits: toLimits(req.Limits), IdleTTL: time.Duration(req.IdleTTLSeconds) * time.Second,
		Network: derefNetwork(req.Network), Metadata: req.Metadata, Mounts: mounts(req.Mounts), Environment: req.Environment,
		Resources: req.Resources})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/sessions/"+rec.ID)
	return writeJSON(w, http.StatusCreated, fromSession(rec))
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	f := store.SessionFilter{Status: kiln.SessionStatus(q.Get("status"))}
	for k, v := range q {
		name, ok := strings.CutPrefix(k, "metadata.")
		switch {
		case ok:
			if f.Metadata == nil {
				f.Metadata = map[string]string{}
			}
			f.Metadata[name] = v[0]
		case k != "status" && k != "limit" && k != "cursor":
			return kiln.Errorf(kiln.Invalid, "unknown query parameter %q; allowed: status, metadata.KEY, limit, cursor", trunc(k, 60))
		}
	}
	p, err := page(r)
	if err != nil {
		return err
	}
	list, next, err := s.svc.ListSessions(r.Context(), c.user, f, p)
	if err != nil {
		return err
	}
	out := client.SessionList{Sessions: make([]client.Session, 0, len(list)), NextCursor: next}
	now := time.Now()
	for _, rec := range list {
		out.Sessions = append(out.Sessions, s.withUse(r, fromSession(rec), now))
	}
	return writeJSON(w, http.StatusOK, out)
}

func page(r *http.Request) (store.Page, error) {
	n, err := intParam(r, "limit", 1, store.MaxLimit)
	if err != nil {
		return store.Page{}, err
	}
	return store.Page{Limit: n, Cursor: r.URL.Query().Get("cursor")}, nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, c *call) error {
	rec, err := s.svc.Session(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.withUse(r, fromSession(rec), time.Now()))
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.svc.DeleteSession(r.Context(), c.user, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) interrupt(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.svc.Interrupt(r.Context(), c.user, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) restart(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.svc.Restart(r.Context(), c.user, r.PathValue("id"), r.URL.Query().Get("language")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// mounts are a request's read-only mounts; the service checks them.
func mounts(ms []client.Mount) []backend.Mount {
	var out []backend.Mount
	for _, m := range ms {
		out = append(out, backend.Mount{Source: m.Source, Target: m.Target})
	}
	return out
}
