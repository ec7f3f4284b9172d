package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Tools and CallTool use the routes of doc.go's table and decode the
// answers.
func TestToolsRoutes(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.RequestURI() {
		case "GET /v1/tools?format=anthropic":
			io.WriteString(w, `[{"name":"run_code","description":"d","input_schema":{"type":"object"}}]`)
		case "POST /v1/tools/call":
			b, _ := io.ReadAll(r.Body)
			if string(b) != `{"name":"run_code","arguments":{"code":"1"}}` {
				t.Errorf("body %s", b)
			}
			io.WriteString(w, `{"name":"run_code","is_error":false,"text":"2","content":[{"type":"image","mime_type":"image/png","data":"iVBORw=="}]}`)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.RequestURI())
			w.WriteHeader(404)
		}
	}))
	defer hs.Close()
	c, _ := New(hs.URL, "k")
	ctx := context.Background()
	defs, err := c.Tools(ctx, "anthropic")
	var list []map[string]any
	if err != nil || json.Unmarshal(defs, &list) != nil || list[0]["input_schema"] == nil {
		t.Errorf("Tools: %s %v", defs, err)
	}
	res, err := c.CallTool(ctx, ToolCall{Name: "run_code", Arguments: json.RawMessage(`{"code":"1"}`)})
	if err != nil || res.Text != "2" || res.Content[0].Type != "image" || string(res.Content[0].Data[:4]) != "\x89PNG" {
		t.Errorf("CallTool: %+v %v", res, err)
	}
}
