package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAccessLog: every request is one info line with the method, the
// route pattern (never the URL), the status, the duration, the user and
// the request id the client was given.
func TestAccessLog(t *testing.T) {
	var buf syncBuffer
	e := newEnv(t, options{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	ctx := ctxT(t)
	me, err := e.admin.User(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := raw(t, "GET", e.url+"/v1/sessions/secret-name", e.key, "", "")
	id := resp.Header.Get("X-Request-Id")
	var line map[string]any
	for _, l := range strings.Split(buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["request_id"] == id {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no log line with request_id %q in:\n%s", id, buf.String())
	}
	want := map[string]any{"level": "INFO", "msg": "request", "method": "GET", "route": "GET /v1/sessions/{id}", "status": float64(404), "user": me.ID}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("log line without duration_ms: %v", line)
	}
	if strings.Contains(buf.String(), "secret-name") {
		t.Errorf("the log has the URL, not the route pattern:\n%s", buf.String())
	}
}

// TestMetricsListener: the handler for kiln serve --metrics-addr serves
// the metrics with no key, and nothing else.
func TestMetricsListener(t *testing.T) {
	e := newEnv(t, options{})
	hs := httptest.NewServer(e.srv.MetricsHandler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "kiln_sessions_active") {
		t.Errorf("GET /metrics without a key: %d %.200s", resp.StatusCode, body)
	}
	for _, p := range []string{"/v1/sessions", "/v1/users", "/"} {
		resp, prob := raw(t, "GET", hs.URL+p, e.key, "", "")
		if resp.StatusCode != 404 || !strings.Contains(prob.Detail, "only GET /metrics") {
			t.Errorf("GET %s on the metrics listener: %d %+v, want 404", p, resp.StatusCode, prob)
		}
	}
	// The API's /metrics still needs a key.
	if resp, p := raw(t, "GET", e.url+"/metrics", "", "", ""); resp.StatusCode != 401 {
		t.Errorf("the API's /metrics without a key: %d %+v", resp.StatusCode, p)
	}
}
