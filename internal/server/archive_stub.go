//go:build !kilnarchive

package server

import (
	"io"
	"net/http"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/kiln"
)

func (s *Server) download(w http.ResponseWriter, r *http.Request, ag *agentclient.Client, dir string) error {
	return kiln.Errorf(kiln.Unsupported, "archives: not yet")
}

func (s *Server) extract(r *http.Request, ag *agentclient.Client, dir, format string, body io.Reader) ([]string, error) {
	return nil, kiln.Errorf(kiln.Unsupported, "archives: not yet")
}
