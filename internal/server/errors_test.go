package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/server"
	"github.com/kiln-dev/kiln/internal/service"
)

// raw sends a request without the client's help, as curl would.
func raw(t *testing.T, method, url, key, ctype, body string) (*http.Response, client.Problem) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p client.Problem
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s %s: problem body %q: %v", method, url, b, err)
		}
	}
	return resp, p
}

func TestErrorsAreProblems(t *testing.T) {
	e := newEnv(t, options{http: server.Config{MaxJSONBytes: 1 << 16}})
	ctx := ctxT(t)
	k, err := e.admin.CreateKey(ctx, "me", "raw")
	if err != nil {
		t.Fatal(err)
	}
	key := k.Secret
	cases := []struct {
		name, method, path, key, ctype, body string
		status                               int
		code, detail                         string
	}{
		{"no key", "GET", "/v1/sessions", "", "", "", 401, "unauthenticated", "Authorization: Bearer"},
		{"unknown key", "GET", "/v1/sessions", "kiln_nope", "", "", 401, "unauthenticated", "valid API key"},
		{"bad JSON", "POST", "/v1/sessions", key, "application/json", "{", 400, "invalid", "ends too early"},
		{"unknown field", "POST", "/v1/sessions", key, "application/json", `{"langs":["python"]}`, 400, "invalid", "langs"},
		{"wrong type", "POST", "/v1/sessions", key, "application/json", `{"languages":"python"}`, 400, "invalid", "an array"},
		{"two values", "POST", "/v1/sessions", key, "application/json", `{} {}`, 400, "invalid", "exactly one"},
		{"form body", "POST", "/v1/sessions", key, "application/x-www-form-urlencoded", `a=b`, 415, "unsupported_media_type", "application/json"},
		{"too large", "POST", "/v1/sessions", key, "application/json", `{"metadata":{"a":"` + strings.Repeat("x", 1<<17) + `"}}`, 413, "too_large", "64 KiB"},
		{"bad language", "POST", "/v1/sessions", key, "application/json", `{"languages":["cobol"]}`, 400, "invalid", "cobol"},
		{"bad limit", "POST", "/v1/sessions", key, "application/json", `{"limits":{"memory_bytes":1}}`, 400, "invalid", "allowed range"},
		{"bad network", "POST", "/v1/sessions", key, "application/json", `{"network":"host"}`, 400, "invalid", `unknown mode "host"; the modes are "none"`},
		{"bad metadata key", "POST", "/v1/sessions", key, "application/json", `{"metadata":{"a b":"c"}}`, 400, "invalid", "metadata key"},
		{"unknown session", "GET", "/v1/sessions/0123", key, "", "", 404, "not_found", `no session "0123"`},
		{"unknown session's files", "GET", "/v1/sessions/0123/files/a.txt", key, "", "", 404, "not_found", `no session "0123"`},
		{"unknown execution", "GET", "/v1/executions/0456", key, "", "", 404, "not_found", `no execution "0456"`},
		{"unknown user", "GET", "/v1/users/0789", key, "", "", 404, "not_found", `no user "0789"`},
		{"unknown key", "DELETE", "/v1/users/me/keys/0abc", key, "", "", 404, "not_found", `no key "0abc"`},
		// Go's mux would redirect these to the cleaned path (307), and a
		// client following it would send the body to another route.
		{"dot-dot in a file path", "PUT", "/v1/sessions/0123/files/a/../../../../run", key, "", "x", 400, "invalid", `".." segment`},
		{"dot in a file path", "DELETE", "/v1/sessions/0123/files/./a", key, "", "", 400, "invalid", `"." segment`},
		{"empty segment", "GET", "/v1/sessions//files", key, "", "", 400, "invalid", "empty segment"},
		{"unknown route", "GET", "/v1/nope", key, "", "", 404, "not_found", "no such API route"},
		{"bad limit param", "GET", "/v1/sessions?limit=0", key, "", "", 400, "invalid", "limit"},
		{"bad status param", "GET", "/v1/sessions?status=zombie", key, "", "", 400, "invalid", "zombie"},
		{"bad cursor", "GET", "/v1/sessions?cursor=zzz", key, "", "", 400, "invalid", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, p := raw(t, tc.method, e.url+tc.path, tc.key, tc.ctype, tc.body)
			if resp.StatusCode != tc.status || p.Code != tc.code || p.Status != tc.status || !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("%d %+v, want %d %s with %q", resp.StatusCode, p, tc.status, tc.code, tc.detail)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

func TestUsersKeysAndOwnership(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	a, b := e.user("alice"), e.user("bob")
	s, err := a.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := a.Exec(ctx, s.ID, client.ExecRequest{Code: "open('secret.txt','w').write('s3cret')"})
	if err != nil {
		t.Fatal(err)
	}
	// A 404 names what was not found.
	_, err = a.Download(ctx, s.ID, "nope.txt", io.Discard)
	if p := wantProblem(t, "alice downloads a missing file", err, 404, "not_found"); !strings.Contains(p.Detail, `no file or directory "nope.txt" in session "`+s.ID+`"`) {
		t.Errorf("missing file: detail %q does not name the file and session", p.Detail)
	}
	// Everything of alice's is a 404 to bob, never a 403.
	_, err = b.Session(ctx, s.ID)
	if p := wantProblem(t, "bob gets alice's session", err, 404, "not_found"); p.Detail != fmt.Sprintf("no session %q", s.ID) {
		t.Errorf("bob gets alice's session: detail %q", p.Detail)
	}
	_, err = b.Exec(ctx, s.ID, client.ExecRequest{Code: "1"})
	wantProblem(t, "bob runs in alice's session", err, 404, "not_found")
	_, err = b.Execution(ctx, x.ID)
	wantProblem(t, "bob reads alice's execution", err, 404, "not_found")
	_, err = b.History(ctx, s.ID, 0, "")
	wantProblem(t, "bob reads alice's history", err, 404, "not_found")
	_, err = b.Download(ctx, s.ID, "secret.txt", io.Discard)
	wantProblem(t, "bob downloads alice's file", err, 404, "not_found")
	_, err = b.Upload(ctx, s.ID, "x", strings.NewReader("x"), true)
	wantProblem(t, "bob uploads into alice's session", err, 404, "not_found")
	wantProblem(t, "bob deletes alice's session", b.DeleteSession(ctx, s.ID), 404, "not_found")
	wantProblem(t, "bob interrupts alice's session", b.Interrupt(ctx, s.ID), 404, "not_found")
	if l, err := b.ListSessions(ctx, client.ListOptions{}); err != nil || len(l.Sessions) != 0 {
		t.Errorf("bob's list = %+v, %v", l, err)
	}
	// Admin-only actions are a 403 for others; a user manages its own keys.
	_, err = b.CreateUser(ctx, client.UserRequest{Name: "mallory"})
	wantProblem(t, "bob makes a user", err, 403, "forbidden")
	_, err = b.Audit(ctx, client.AuditOptions{})
	wantProblem(t, "bob reads the audit log", err, 403, "forbidden")
	me, err := a.User(ctx, "me")
	if err != nil || me.Name != "alice" {
		t.Fatalf("me = %+v, %v", me, err)
	}
	_, err = b.Keys(ctx, me.ID)
	wantProblem(t, "bob lists alice's keys", err, 404, "not_found")
	k, err := b.CreateKey(ctx, "me", "second")
	if err != nil || !strings.HasPrefix(k.Secret, "kiln_") {
		t.Fatalf("own key: %+v, %v", k, err)
	}
	if err := b.RevokeKey(ctx, "me", k.ID); err != nil {
		t.Fatal(err)
	}
	revoked, _ := client.New(e.url, k.Secret)
	_, err = revoked.Languages(ctx)
	wantProblem(t, "a revoked key", err, 401, "unauthenticated")
	_, err = e.admin.CreateUser(ctx, client.UserRequest{Name: "alice"})
	wantProblem(t, "a taken name", err, 409, "conflict")

	// The audit log has the execution with a hash of its code.
	log, err := e.admin.Audit(ctx, client.AuditOptions{Session: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, en := range log.Entries {
		actions = append(actions, en.Action)
		if en.Action == "execution" && (en.CodeHash == "" || en.ExecutionID != x.ID || en.Outcome != "ok") {
			t.Errorf("execution entry = %+v", en)
		}
	}
	if strings.Join(actions, ",") != "session.create,execution" {
		t.Errorf("audit actions = %v", actions)
	}
}

func TestRateLimitAndQuotas(t *testing.T) {
	e := newEnv(t, options{
		svc: service.Config{MaxSessionsPerUser: 2, Concurrency: 1, QueueLength: 1},
		// One token per 2 s: the four quick requests below get their 429
		// unless they take 2 s, not 1 s, on a loaded machine.
		http: server.Config{RatePerSecond: 0.5, RateBurst: 3},
	})
	ctx := ctxT(t)
	c := e.user("carol")
	var err error
	for i := 0; i < 4 && err == nil; i++ {
		_, err = c.Languages(ctx)
	}
	p := wantProblem(t, "the fourth quick request", err, 429, "rate_limited")
	if p.RetryAfterSeconds < 1 {
		t.Errorf("429 without Retry-After: %+v", p)
	}
	time.Sleep(6 * time.Second) // the bucket refills for the three creates

	s1, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = c.CreateSession(ctx, client.SessionRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSession(ctx, client.SessionRequest{})
	wantProblem(t, "a third session", err, 429, "quota_exceeded")
	_ = s1
}

func TestQueueFullAnswersAtOnce(t *testing.T) {
	e := newEnv(t, options{svc: service.Config{Concurrency: 1, QueueLength: 1}})
	ctx := ctxT(t)
	c := e.user("dan")
	var ids []string
	for i := 0; i < 3; i++ {
		s, err := c.CreateSession(ctx, client.SessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	done := make(chan error, 2)
	for _, id := range ids[:2] {
		go func() {
			_, err := c.Exec(ctx, id, client.ExecRequest{Code: "import time; time.sleep(2)"})
			done <- err
		}()
	}
	time.Sleep(700 * time.Millisecond) // one runs, one waits
	start := time.Now()
	_, err := c.Exec(ctx, ids[2], client.ExecRequest{Code: "1"})
	p := wantProblem(t, "a cell beyond the queue", err, 503, "queue_full")
	if time.Since(start) > time.Second || p.RetryAfterSeconds < 1 {
		t.Errorf("queue full answered after %v with %+v", time.Since(start), p)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("queued cell: %v", err)
		}
	}
}
