package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// toolCall posts one call to /v1/tools/call with key.
func toolCall(t *testing.T, e *env, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/v1/tools/call", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// GET /v1/tools answers both model APIs' formats, and refuses others.
func TestToolDefinitionsRoute(t *testing.T) {
	e := newEnv(t, options{})
	for format, field := range map[string]string{"": "function", "?format=openai": "function", "?format=anthropic": "input_schema"} {
		req, _ := http.NewRequest("GET", e.url+"/v1/tools"+format, nil)
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var defs []map[string]any
		json.NewDecoder(resp.Body).Decode(&defs)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(defs) < 10 || defs[0][field] == nil {
			t.Errorf("GET /v1/tools%s: %d, %d definitions, first %v; want each with %q", format, resp.StatusCode, len(defs), defs, field)
		}
	}
	resp, p := raw(t, "GET", e.url+"/v1/tools?format=gemini", e.key, "", "")
	if resp.StatusCode != 400 || !strings.Contains(p.Detail, "anthropic") {
		t.Errorf("an unknown format: %d %q", resp.StatusCode, p.Detail)
	}
}

// POST /v1/tools/call runs a model's call under the caller's key, with
// the REST API's rules: ownership, history, plain errors.
func TestToolCallRoute(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	status, out := toolCall(t, e, e.key, `{"name": "run_code", "arguments": "{\"code\": \"print(6*7)\"}"}`)
	if status != 200 || out["is_error"] != false || !strings.Contains(out["text"].(string), "42") {
		t.Fatalf("run_code with OpenAI-style string arguments: %d %v", status, out)
	}
	status, out = toolCall(t, e, e.key, `{"name": "run_code", "arguments": {"language": "klingon", "code": "x"}}`)
	if status != 200 || out["is_error"] != true || !strings.Contains(out["text"].(string), `unknown language "klingon"`) {
		t.Errorf("an unknown language: %d %v, want a tool error naming it", status, out)
	}

	_, out = toolCall(t, e, e.key, `{"name": "create_session", "arguments": {}}`)
	id := regexp.MustCompile(`session_id: (\S+)`).FindStringSubmatch(out["text"].(string))
	if id == nil {
		t.Fatalf("create_session: %v", out)
	}
	_, out = toolCall(t, e, e.key, `{"name": "execute_code", "arguments": {"session_id": "`+id[1]+`", "code": "y = 5"}}`)
	_, out = toolCall(t, e, e.key, `{"name": "execute_code", "arguments": {"session_id": "`+id[1]+`", "code": "print(y * 2)"}}`)
	if !strings.Contains(out["text"].(string), "10") {
		t.Errorf("state between calls: %v", out)
	}
	hist, err := e.admin.History(ctx, id[1], 0, "")
	if err != nil || len(hist.Executions) != 2 {
		t.Errorf("the session's history has %v (%v), want the tool calls' 2 cells", hist, err)
	}

	// Another user cannot reach the admin's session through the tools.
	u, err := e.admin.CreateUser(ctx, client.UserRequest{Name: "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.admin.CreateKey(ctx, u.ID, "t")
	if err != nil {
		t.Fatal(err)
	}
	_, out = toolCall(t, e, k.Secret, `{"name": "execute_code", "arguments": {"session_id": "`+id[1]+`", "code": "print(y)"}}`)
	if out["is_error"] != true || !strings.Contains(out["text"].(string), "no session") {
		t.Errorf("another user's session: %v, want a not-found tool error", out)
	}
	if status, _ := toolCall(t, e, "kiln_wrong", `{"name": "list_languages"}`); status != 401 {
		t.Errorf("a wrong key: %d, want 401", status)
	}
	if status, out := toolCall(t, e, e.key, `{"arguments": {}}`); status != 400 {
		t.Errorf("no name: %d %v, want 400", status, out)
	}
}

// /mcp refuses a request without a valid key before MCP reads it.
func TestMCPNeedsKey(t *testing.T) {
	e := newEnv(t, options{})
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, key := range []string{"", "kiln_wrong"} {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", e.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("key %q: %d, want 401", key, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the right key: %d, want 200", resp.StatusCode)
	}
}

// The web notebook's sign-in cookie (with its CSRF header) works for
// POST /v1/tools/call, as for every API route, but never for /mcp,
// which takes only a bearer key.
func TestToolsWithCookie(t *testing.T) {
	e := newEnv(t, options{})
	b := newBrowser(t, e.url)
	b.signIn(e.key)
	resp, text := b.do("POST", "/v1/tools/call", `{"name": "run_code", "arguments": {"code": "print(2+3)"}}`, true)
	if resp.StatusCode != 200 || !strings.Contains(text, `"is_error":false`) || !strings.Contains(text, "5") {
		t.Errorf("tools/call signed in by cookie: %d %s", resp.StatusCode, text)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	resp, text = b.do("POST", "/mcp", init, true)
	if resp.StatusCode != 401 || !strings.Contains(text, "Bearer") {
		t.Errorf("/mcp signed in by cookie: %d %s, want 401 asking for a key", resp.StatusCode, text)
	}
}
