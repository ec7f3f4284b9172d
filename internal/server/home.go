package server

import (
	"net/http"
)

// homePage answers GET / while kiln has no web UI: a person who opens the
// server's address in a browser learns what is there and where to go.
const homePage = `kiln: a self-hosted code interpreter.

This address serves kiln's HTTP API; there is no web UI yet.

  API             /v1 (send an API key as "Authorization: Bearer KEY")
  route list      /v1/openapi.json (OpenAPI 3.1)
  health          /v1/health/live and /v1/health/ready
  documentation   README.md and docs/ in kiln's source repository

The admin API key is printed once, on the server's first start.
`

func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	noteRoute(w, r)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write([]byte(homePage))
	}
}
