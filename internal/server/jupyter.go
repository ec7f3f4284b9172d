package server

import (
	"net/http"
	"strings"

	"github.com/kiln-dev/kiln/internal/jupyter"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// jupyterGateway is kiln as a Jupyter kernel gateway (internal/jupyter)
// on this server's authentication, limits and error table.
func (s *Server) jupyterGateway() *jupyter.Gateway {
	return jupyter.New(s.svc, jupyter.Config{
		Authenticate: s.jupyterAuth,
		Status:       func(err error) int { return problemFor(err).Status },
		Log:          s.log,
	})
}

// jupyterAuth authenticates a Jupyter client, which sends the key as
// "Authorization: token KEY" (or Bearer), or, on a WebSocket from a
// browser, as ?token=KEY. The same failure limits, scopes and rate limits
// as every other route apply.
func (s *Server) jupyterAuth(r *http.Request) (jupyter.Caller, error) {
	auth := r.Header.Get("Authorization")
	key := ""
	if scheme, k, ok := strings.Cut(auth, " "); ok && (strings.EqualFold(scheme, "token") || strings.EqualFold(scheme, "Bearer")) {
		key = strings.TrimSpace(k)
	} else if auth == "" {
		key = r.URL.Query().Get("token")
	}
	if key == "" {
		return jupyter.Caller{}, kiln.Errorf(kiln.Unauthenticated, "send a kiln API key as Jupyter does: \"Authorization: token KEY\" (or ?token=KEY on a WebSocket)")
	}
	addr := clientAddr(r)
	if err := s.fails.check(addr); err != nil {
		s.svc.Metrics().Rejected("auth_failures")
		return jupyter.Caller{}, err
	}
	u, k, err := s.svc.Authenticate(r.Context(), key)
	if err != nil {
		if kiln.KindOf(err) == kiln.Unauthenticated {
			s.fails.failed(addr)
		}
		return jupyter.Caller{}, err
	}
	if err := checkScope(r, k); err != nil {
		return jupyter.Caller{}, err
	}
	if err := s.limits.allow(u.ID, k.ID); err != nil {
		s.svc.Metrics().Rejected("rate_limit")
		return jupyter.Caller{}, err
	}
	return jupyter.Caller{User: u, Allow: func() error { return s.limits.allow(u.ID, k.ID) }}, nil
}
