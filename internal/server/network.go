package server

import (
	"net/http"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// setNetwork changes a live session's network policy: the owner within
// the server's ceiling, an admin beyond it. The answer is the session.
func (s *Server) setNetwork(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.NetworkPolicy
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	rec, err := s.svc.SetNetwork(r.Context(), c.user, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fromSession(rec))
}

// derefNetwork is a request's policy; none given is "none".
func derefNetwork(p *client.NetworkPolicy) kiln.NetworkPolicy {
	if p == nil {
		return kiln.NetworkPolicy{}
	}
	return *p
}
