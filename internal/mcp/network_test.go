package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/tools"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over MCP, a cell's egress is text the model reads, a denied attempt
// with the policy's reason; create_session and install_packages take the
// network policy and packages.
func TestEgressOverMCP(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions/{id}/executions", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(client.Execution{ID: "x", Status: "ok", Result: &client.CellResult{Status: "error",
			Egress: []client.EgressRecord{{Host: "example.com", Port: 443, Kind: "connect", Reason: `network policy is "none"`}}}})
	})
	var sent client.SessionRequest
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&sent)
		json.NewEncoder(w).Encode(client.Session{ID: "s1", Languages: []string{"python"}, Network: *sent.Network})
	})
	c, err := tools.InProcess(mux, "k", "192.0.2.1:1")
	if err != nil {
		t.Fatal(err)
	}
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := NewServer("test", StdioClient(c)).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute_code", Arguments: map[string]any{"session_id": "s1", "code": "import urllib.request"}})
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, p := range r.Content {
		if tc, ok := p.(*sdk.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	if all := strings.Join(text, "\n"); !strings.Contains(all, "network:\nexample.com:443 denied: network policy is \"none\"") {
		t.Errorf("MCP result text %q lacks the denied attempt with its reason", all)
	}
	r, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "create_session", Arguments: map[string]any{"network": map[string]any{"mode": "allowlist", "allow": []string{"api.example.com"}}}})
	if err != nil || r.IsError || sent.Network == nil || sent.Network.Allow[0] != "api.example.com" {
		t.Errorf("create_session with network over MCP: %v %+v, sent %+v", err, r, sent.Network)
	}
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range tl.Tools {
		found = found || tool.Name == "install_packages"
	}
	if !found {
		t.Error("install_packages is not listed")
	}
}
