package openapitest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// answer is a fake server's one answer.
func answer(status int, ctype, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		w.Write([]byte(body))
	}
}

func runResult(t *testing.T) string {
	b, err := json.Marshal(client.RunResult{Result: kiln.CellResult{Language: "python", Status: kiln.StatusOK}, Files: []client.File{}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// check sends one request through the checker to h and returns what it
// found wrong.
func check(t *testing.T, h http.Handler, method, path string) []string {
	t.Helper()
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler(h))
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Close()
	return c.Errors()
}

func TestCheckerFindsEachMismatch(t *testing.T) {
	problem := `{"type":"urn:kiln:problem:not_found","title":"Not Found","status":404,"code":"not_found","detail":"no"}`
	for _, tc := range []struct {
		name, method, path string
		h                  http.Handler
		want               string // "" when the answer is right
	}{
		{"a right answer", "POST", "/v1/run", answer(200, "application/json", runResult(t)), ""},
		{"outputs null where the document says an array", "POST", "/v1/run",
			answer(200, "application/json", strings.Replace(runResult(t), `"outputs":[]`, `"outputs":null`, 1)), "does not match"},
		{"artifacts null", "POST", "/v1/run",
			answer(200, "application/json", strings.Replace(runResult(t), `"artifacts":[]`, `"artifacts":null`, 1)), "does not match"},
		{"a status the operation does not document", "POST", "/v1/users", answer(200, "application/json", `{}`), "status 200 is not documented"},
		{"a wrong method answered 404", "DELETE", "/v1/languages", answer(404, "application/problem+json", problem), "want 405"},
		{"a 405 without Allow", "DELETE", "/v1/languages", answer(405, "application/problem+json", strings.ReplaceAll(problem, "404", "405")), "without Allow"},
		{"an undocumented content type", "GET", "/v1/languages", answer(200, "text/html", "<p>"), "Content-Type text/html"},
		{"an error that is not a problem", "GET", "/v1/languages", answer(500, "application/problem+json", `{"error":"x"}`), "does not match"},
		{"a bad event in a stream", "POST", "/v1/sessions/s1/executions",
			answer(200, "text/event-stream", "event: stdout\ndata: {\"type\":42}\n\n"), "an event does not match"},
		{"a right stream", "POST", "/v1/sessions/s1/executions",
			answer(200, "text/event-stream", "event: stdout\ndata: {\"type\":\"stdout\",\"data\":\"hi\"}\n\n"), ""},
	} {
		errs := check(t, tc.h, tc.method, tc.path)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: unexpected mismatches %q", tc.name, errs)
		case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs[0], tc.want)):
			t.Errorf("%s: mismatches %q, want one saying %q", tc.name, errs, tc.want)
		}
	}
}

// TestCheckerReadsWebSocketMessages: the server's messages on a socket are
// Events and the client's WSMessages.
func TestCheckerReadsWebSocketMessages(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		conn.Read(r.Context())
		conn.Write(r.Context(), websocket.MessageText, []byte(`{"type":"stdout","data":"ok"}`))
		conn.Write(r.Context(), websocket.MessageText, []byte(`{"type":"done","execution":"not an object"}`))
		conn.Close(websocket.StatusNormalClosure, "")
	})))
	defer srv.Close()
	ctx := context.Background()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/sessions/s1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write(ctx, websocket.MessageText, []byte(`{"type":"execute","execute":{"code":7}}`))
	for {
		if _, _, err := conn.Read(ctx); err != nil {
			break
		}
	}
	conn.CloseNow()
	srv.Close()
	errs := strings.Join(c.Errors(), "\n")
	if !strings.Contains(errs, "a client message does not match") || !strings.Contains(errs, "a server message does not match") {
		t.Fatalf("mismatches %q, want one client and one server message", errs)
	}
	if n := strings.Count(errs, "does not match"); n != 2 {
		t.Fatalf("%d mismatches, want 2 (the stdout event is right): %s", n, errs)
	}
}
