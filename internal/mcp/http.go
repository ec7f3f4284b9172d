package mcp

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/tools"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// PeerHeader carries the MCP client's address from the authenticating
// wrapper to the tool calls; HTTPHandler sets it, overwriting whatever a
// client sent.
const PeerHeader = "X-Kiln-Mcp-Peer"

// Version is the version the MCP server reports; the kiln binary sets it.
var Version = "dev"

// HTTPHandler serves MCP as streamable HTTP, stateless: every POST is
// authenticated on its own (with its bearer key) by api, kiln's API
// handler, which the tools call in process. auth checks the key first
// and answers a refusal itself, so a wrong key never reaches MCP.
func HTTPHandler(version string, api http.Handler, auth func(http.ResponseWriter, *http.Request) bool) http.Handler {
	cf := func(ctx context.Context, extra *sdk.RequestExtra) (*client.Client, error) {
		if extra == nil || extra.Header == nil {
			return nil, errors.New("no HTTP request carries this call")
		}
		scheme, key, _ := strings.Cut(extra.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return nil, errors.New("send an API key as \"Authorization: Bearer KEY\"")
		}
		return tools.InProcess(api, strings.TrimSpace(key), extra.Header.Get(PeerHeader))
	}
	s := NewServer(version, cf)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !auth(w, r) {
			return
		}
		r.Header.Set(PeerHeader, r.RemoteAddr)
		h.ServeHTTP(w, r)
	})
}
