package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/mcp"
	"github.com/kiln-dev/kiln/internal/tools"
)

// The function-calling routes and /mcp serve internal/tools' one table.
// A call goes back through this server in process (tools.InProcess) with
// the caller's own key, so it has every rule of the REST route it uses.

func (s *Server) listTools(w http.ResponseWriter, r *http.Request, c *call) error {
	defs, err := tools.Definitions(r.URL.Query().Get("format"))
	if err != nil {
		return kiln.Errorf(kiln.Invalid, "%v", err)
	}
	return writeJSON(w, http.StatusOK, defs)
}

func (s *Server) callTool(w http.ResponseWriter, r *http.Request, c *call) error {
	var in client.ToolCall
	if err := decode(w, r, s.cfg.MaxRunBytes, &in); err != nil {
		return err
	}
	if in.Name == "" {
		return kiln.Errorf(kiln.Invalid, "name is required: one of %s (GET /v1/tools lists them)", strings.Join(tools.Names(), ", "))
	}
	args := in.Arguments
	var str string
	if json.Unmarshal(args, &str) == nil {
		args = json.RawMessage(str)
	}
	key := bearerKey(r)
	if r.Header.Get("Authorization") == "" {
		// The web notebook's cookie, already checked (with its CSRF
		// header) by authenticate: the calls go on with its key.
		key, _, _ = s.cookieKey(r)
	}
	cl, err := tools.InProcess(s, key, r.RemoteAddr)
	if err != nil {
		return kiln.Wrap(kiln.Internal, err, "cannot make the tool's client")
	}
	res := tools.Call(r.Context(), cl, in.Name, args, nil)
	return writeJSON(w, http.StatusOK, client.ToolCallResult{Name: in.Name, IsError: res.IsError, Text: res.Text(), Content: res.Content})
}

// bearerKey is the request's API key, already authenticated.
func bearerKey(r *http.Request) string {
	_, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.TrimSpace(key)
}

// mcpHandler serves MCP's streamable HTTP at /mcp. Each request is
// authenticated and rate-limited as an API route is, before MCP reads it.
func (s *Server) mcpHandler() http.Handler {
	return mcp.HTTPHandler(mcp.Version, s, func(w http.ResponseWriter, r *http.Request) bool {
		noteRoute(w, r)
		if r.Header.Get("Authorization") == "" {
			// MCP clients send a key; a browser's sign-in cookie must not
			// drive the tools from a page.
			writeError(w, r, s.log, kiln.Errorf(kiln.Unauthenticated, "MCP at /mcp needs an API key: send \"Authorization: Bearer KEY\""))
			return false
		}
		c, err := s.authenticate(r)
		if err == nil {
			noteUser(w, c.user.ID)
			err = checkScope(r, c.key)
		}
		if err == nil {
			err = s.limits.allow(c.user.ID, c.key.ID)
		}
		if err != nil {
			writeError(w, r, s.log, err)
			return false
		}
		return true
	})
}
