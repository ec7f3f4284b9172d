package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/server/openapi"
	"github.com/kiln-dev/kiln/internal/service"
)

func TestWarmPool(t *testing.T) {
	e := newEnv(t, options{svc: service.Config{PoolSize: 1}})
	ctx := ctxT(t)
	c := e.user("pia")
	waitMetric(t, e, `kiln_pool_ready 1`)
	s1, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A session that asks for other limits never takes a pooled sandbox.
	s2, err := c.CreateSession(ctx, client.SessionRequest{Limits: client.Limits{MemoryBytes: 256 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	m := metricsText(t, e)
	if !strings.Contains(m, `kiln_sessions_created_total{source="pool"} 1`) || !strings.Contains(m, `kiln_sessions_created_total{source="fresh"} 1`) {
		t.Errorf("metrics after one pooled and one fresh session:\n%s", grep(m, "kiln_sessions_created_total"))
	}
	x, err := c.Exec(ctx, s1.ID, client.ExecRequest{Code: "open('mine','w').write('1'); 1+1"})
	if err != nil || x.Status != "ok" {
		t.Fatalf("cell in the pooled session: %+v %v", x, err)
	}
	if err := c.DeleteSession(ctx, s1.ID); err != nil {
		t.Fatal(err)
	}
	// The next pooled session is a different sandbox with a clean workspace.
	waitMetric(t, e, `kiln_pool_ready 1`)
	s3, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s3.ID == s1.ID {
		t.Fatal("a pooled session id came back")
	}
	if l, err := c.ListFiles(ctx, s3.ID, ""); err != nil || len(l.Entries) != 0 {
		t.Errorf("the next pooled workspace: %+v, %v", l, err)
	}
	_ = s2
}

func TestIdleExpiry(t *testing.T) {
	e := newEnv(t, options{svc: service.Config{IdleCheckEvery: 100 * time.Millisecond}})
	ctx := ctxT(t)
	c := e.user("ivo")
	idle, err := c.CreateSession(ctx, client.SessionRequest{IdleTTLSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	busy, err := c.CreateSession(ctx, client.SessionRequest{IdleTTLSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A cell running longer than the TTL keeps its session alive.
	x, err := c.Exec(ctx, busy.ID, client.ExecRequest{Code: "import time; time.sleep(2.5); 'done'"})
	if err != nil || x.Status != "ok" {
		t.Fatalf("long cell: %+v %v", x, err)
	}
	s, err := c.Session(ctx, idle.ID)
	if err != nil || s.Status != "ended" || !strings.HasPrefix(s.EndReason, "idle") {
		t.Errorf("idle session after 2.5 s: %+v %v", s, err)
	}
	if s, err = c.Session(ctx, busy.ID); err != nil || s.Status != "active" {
		t.Errorf("busy session: %+v %v", s, err)
	}
}

// TestOpenAPIMatchesRoutes keeps the document and the mux the same.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t, options{})
	resp, _ := raw(t, "GET", e.url+"/v1/openapi.json", "", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("openapi.json: %d", resp.StatusCode)
	}
	doc := map[string]bool{}
	for _, op := range openapi.Operations() {
		doc[op.Method+" "+op.Path] = true
	}
	for _, r := range e.srv.Routes() {
		r = strings.ReplaceAll(r, "{path...}", "{path}")
		if !doc[r] {
			t.Errorf("route %s is served but not in the OpenAPI document", r)
		}
		delete(doc, r)
	}
	for r := range doc {
		t.Errorf("the OpenAPI document has %s, which is not served", r)
	}
}

func metricsText(t *testing.T, e *env) string {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+e.adminKey(t))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitMetric(t *testing.T, e *env, line string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(metricsText(t, e), line) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("metric %q never appeared", line)
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
