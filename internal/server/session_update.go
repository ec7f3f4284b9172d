package server

import (
	"net/http"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// updateSession renames a session (PATCH /v1/sessions/{id}); the service
// checks the name and that the caller owns the session.
func (s *Server) updateSession(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.SessionUpdate
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return kiln.Errorf(kiln.Invalid, "the body must have name: the new name, or \"\" to remove it")
	}
	rec, err := s.svc.RenameSession(r.Context(), c.user, r.PathValue("id"), *req.Name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.withUse(r, fromSession(rec), time.Now()))
}

// withUse adds what an active session uses now, when it is active here.
func (s *Server) withUse(r *http.Request, cs client.Session, now time.Time) client.Session {
	if cs.Status != string(kiln.SessionActive) {
		return cs
	}
	if u, ok := s.svc.SessionUse(r.Context(), cs.ID, now); ok {
		cs.Use = &client.SessionUse{WorkspaceBytes: u.WorkspaceBytes, WorkspaceLimitBytes: u.WorkspaceLimitBytes,
			Busy: u.Busy, IdleSecondsLeft: int64(u.IdleLeft / time.Second)}
		if u.Measured {
			cpu, peak := u.CPUTime.Milliseconds(), u.PeakMemoryBytes
			cs.Use.CPUMs, cs.Use.PeakMemoryBytes = &cpu, &peak
		}
	}
	return cs
}
