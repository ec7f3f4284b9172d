package server

import (
	"net/http"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// complete asks the session's kernel for completions at a cursor
// (POST /v1/sessions/{id}/complete), for the notebook's editor; the
// service bounds the code as a cell's.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.CompleteRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	res, err := s.svc.Complete(r.Context(), c.user, r.PathValue("id"), req.Language, req.Code, req.Cursor)
	if err != nil {
		return err
	}
	if res.Matches == nil {
		res.Matches = []string{}
	}
	return writeJSON(w, http.StatusOK, client.Completion{Matches: res.Matches, CursorStart: res.CursorStart, CursorEnd: res.CursorEnd})
}

// format formats code with the language's formatter in the session's
// sandbox (POST /v1/sessions/{id}/format).
func (s *Server) format(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.FormatRequest
	if err := decode(w, r, s.cfg.MaxJSONBytes, &req); err != nil {
		return err
	}
	if req.Code == "" {
		return kiln.Errorf(kiln.Invalid, "code is empty: send the code to format")
	}
	out, err := s.svc.Format(r.Context(), c.user, r.PathValue("id"), req.Language, req.Code)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, client.Formatted{Code: out})
}
