package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestRoutes checks every JSON call against the route table in doc.go:
// the method, the escaped path and query, the body, and that the answer
// is decoded.
func TestRoutes(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	sess := Session{ID: "s1", Status: "active", Languages: []string{"python"}, Created: t0, LastActive: t0}
	exe := Execution{ID: "e1", SessionID: "s1", Seq: 1, Language: "python", Code: "1", Status: "ok", Started: t0}
	fi := FileInfo{Path: "d/a.txt", Name: "a.txt", Type: "file", Size: 3, Mode: 0o644, ModTime: t0}
	user := User{ID: "u1", Name: "ada", Created: t0}
	key := Key{ID: "k1", UserID: "u1", Name: "ci", Prefix: "kiln_ab", Secret: "kiln_secret", Created: t0}
	tests := []struct {
		name   string
		call   func(context.Context, *Client) (any, error)
		method string
		uri    string // path and query as sent
		body   string // JSON the client must send; "" for none
		status int
		answer any // nil: no body
	}{
		{"run", func(ctx context.Context, c *Client) (any, error) {
			return c.Run(ctx, RunRequest{Language: "python", Code: "print(1)"})
		}, "POST", "/v1/run", `{"language":"python","code":"print(1)","limits":{}}`, 200,
			&RunResult{Result: CellResult{Status: "ok", Stdout: "1\n", Outputs: []Output{}, Artifacts: []Artifact{}}}},
		{"create session", func(ctx context.Context, c *Client) (any, error) {
			return c.CreateSession(ctx, SessionRequest{Languages: []string{"python"}, IdleTTLSeconds: 60, Metadata: map[string]string{"conv": "7"}})
		}, "POST", "/v1/sessions", `{"languages":["python"],"limits":{},"idle_ttl_seconds":60,"metadata":{"conv":"7"}}`, 201, &sess},
		{"get session", func(ctx context.Context, c *Client) (any, error) { return c.Session(ctx, "s1") },
			"GET", "/v1/sessions/s1", "", 200, &sess},
		{"session id cannot leave its segment", func(ctx context.Context, c *Client) (any, error) { return c.Session(ctx, "../users?x=1") },
			"GET", "/v1/sessions/..%2Fusers%3Fx=1", "", 200, &sess},
		{"list sessions", func(ctx context.Context, c *Client) (any, error) {
			return c.ListSessions(ctx, ListOptions{Status: "active", Metadata: map[string]string{"conv": "7 8"}, Limit: 10, Cursor: "c&1"})
		}, "GET", "/v1/sessions?cursor=c%261&limit=10&metadata.conv=7+8&status=active", "", 200,
			&SessionList{Sessions: []Session{sess}, NextCursor: "c2"}},
		{"delete session", func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteSession(ctx, "s1") },
			"DELETE", "/v1/sessions/s1", "", 204, nil},
		{"interrupt", func(ctx context.Context, c *Client) (any, error) { return nil, c.Interrupt(ctx, "s1") },
			"POST", "/v1/sessions/s1/interrupt", "", 204, nil},
		{"restart one language", func(ctx context.Context, c *Client) (any, error) { return nil, c.Restart(ctx, "s1", "python") },
			"POST", "/v1/sessions/s1/restart?language=python", "", 204, nil},
		{"restart all", func(ctx context.Context, c *Client) (any, error) { return nil, c.Restart(ctx, "s1", "") },
			"POST", "/v1/sessions/s1/restart", "", 204, nil},
		{"set network", func(ctx context.Context, c *Client) (any, error) {
			return c.SetNetwork(ctx, "s1", NetworkPolicy{Mode: "allowlist", Allow: []string{"example.com"}})
		}, "PUT", "/v1/sessions/s1/network", `{"mode":"allowlist","allow":["example.com"]}`, 200, &sess},
		{"exec", func(ctx context.Context, c *Client) (any, error) {
			in := "x"
			return c.Exec(ctx, "s1", ExecRequest{Code: "1", Stdin: &in, TimeoutMS: 500})
		}, "POST", "/v1/sessions/s1/executions", `{"code":"1","stdin":"x","timeout_ms":500}`, 200, &exe},
		{"execution", func(ctx context.Context, c *Client) (any, error) { return c.Execution(ctx, "e1") },
			"GET", "/v1/executions/e1", "", 200, &exe},
		{"history", func(ctx context.Context, c *Client) (any, error) { return c.History(ctx, "s1", 5, "c1") },
			"GET", "/v1/sessions/s1/executions?cursor=c1&limit=5", "", 200, &ExecutionList{Executions: []Execution{exe}}},
		{"list root", func(ctx context.Context, c *Client) (any, error) { return c.ListFiles(ctx, "s1", "") },
			"GET", "/v1/sessions/s1/files", "", 200, &FileList{Path: "", Entries: []FileInfo{fi}}},
		{"list dir", func(ctx context.Context, c *Client) (any, error) { return c.ListFiles(ctx, "s1", "/d") },
			"GET", "/v1/sessions/s1/files/d", "", 200, &FileList{Path: "d", Entries: []FileInfo{fi}}},
		{"stat", func(ctx context.Context, c *Client) (any, error) { return c.Stat(ctx, "s1", "d/a.txt") },
			"GET", "/v1/sessions/s1/files/d/a.txt?stat=true", "", 200, &fi},
		{"mkdir", func(ctx context.Context, c *Client) (any, error) { return c.Mkdir(ctx, "s1", "/d/e") },
			"POST", "/v1/sessions/s1/mkdir", `{"path":"d/e"}`, 201, &fi},
		{"move", func(ctx context.Context, c *Client) (any, error) {
			return c.Move(ctx, "s1", MoveRequest{From: "a", To: "/b/c", Overwrite: true})
		}, "POST", "/v1/sessions/s1/move", `{"from":"a","to":"b/c","overwrite":true}`, 200, &fi},
		{"delete file", func(ctx context.Context, c *Client) (any, error) {
			return nil, c.DeleteFile(ctx, "s1", "d/a.txt", false)
		},
			"DELETE", "/v1/sessions/s1/files/d/a.txt", "", 204, nil},
		{"delete dir", func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteFile(ctx, "s1", "d", true) },
			"DELETE", "/v1/sessions/s1/files/d?recursive=true", "", 204, nil},
		{"create user", func(ctx context.Context, c *Client) (any, error) {
			return c.CreateUser(ctx, UserRequest{Name: "ada", Admin: true})
		}, "POST", "/v1/users", `{"name":"ada","admin":true}`, 201, &user},
		{"users", func(ctx context.Context, c *Client) (any, error) { return c.Users(ctx) },
			"GET", "/v1/users", "", 200, []User{user}},
		{"me", func(ctx context.Context, c *Client) (any, error) { return c.User(ctx, "me") },
			"GET", "/v1/users/me", "", 200, &user},
		{"create key", func(ctx context.Context, c *Client) (any, error) { return c.CreateKey(ctx, "me", "ci") },
			"POST", "/v1/users/me/keys", `{"name":"ci"}`, 201, &key},
		{"keys", func(ctx context.Context, c *Client) (any, error) { return c.Keys(ctx, "u1") },
			"GET", "/v1/users/u1/keys", "", 200, []Key{key}},
		{"revoke key", func(ctx context.Context, c *Client) (any, error) { return nil, c.RevokeKey(ctx, "u1", "k1") },
			"DELETE", "/v1/users/u1/keys/k1", "", 204, nil},
		{"share session", func(ctx context.Context, c *Client) (any, error) { return c.ShareSession(ctx, "s1", "u/2", "viewer") },
			"PUT", "/v1/sessions/s1/shares/u%2F2", `{"role":"viewer"}`, 201, &Share{SessionID: "s1", UserID: "u/2", Role: "viewer", Created: t0}},
		{"shares", func(ctx context.Context, c *Client) (any, error) { return c.Shares(ctx, "s1") },
			"GET", "/v1/sessions/s1/shares", "", 200, &ShareList{Shares: []Share{{SessionID: "s1", UserID: "u2", Role: "collaborator", Created: t0}}}},
		{"revoke share", func(ctx context.Context, c *Client) (any, error) { return nil, c.RevokeShare(ctx, "s1", "u2") },
			"DELETE", "/v1/sessions/s1/shares/u2", "", 204, nil},
		{"audit", func(ctx context.Context, c *Client) (any, error) {
			return c.Audit(ctx, AuditOptions{User: "u1", Session: "s1", Actor: "u2", Limit: 2})
		}, "GET", "/v1/audit?actor=u2&limit=2&session=s1&user=u1", "", 200,
			&AuditList{Entries: []AuditEntry{{ID: "a1", Time: t0, UserID: "u1", Action: "execution", Detail: json.RawMessage(`{}`)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != tt.method || r.RequestURI != tt.uri {
					t.Errorf("request %s %s; want %s %s", r.Method, r.RequestURI, tt.method, tt.uri)
				}
				if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
					t.Errorf("Authorization %q; want the bearer key", got)
				}
				body, _ := io.ReadAll(r.Body)
				if tt.body == "" {
					if len(body) != 0 {
						t.Errorf("body %q; want none", body)
					}
				} else {
					if ct := r.Header.Get("Content-Type"); ct != "application/json" {
						t.Errorf("Content-Type %q; want application/json", ct)
					}
					var got, want any
					if err := json.Unmarshal(body, &got); err != nil {
						t.Errorf("body %q is not JSON: %v", body, err)
					}
					json.Unmarshal([]byte(tt.body), &want)
					diff(t, "request body", got, want)
				}
				if tt.answer == nil {
					w.WriteHeader(tt.status)
					return
				}
				writeJSON(w, tt.status, tt.answer)
			})
			got, err := tt.call(ctxT(t), c)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if tt.answer != nil {
				diff(t, "decoded answer", got, tt.answer)
			}
		})
	}
}

func TestAllSessionsPages(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("cursor") {
		case "":
			writeJSON(w, 200, SessionList{Sessions: []Session{{ID: "s3"}, {ID: "s2"}}, NextCursor: "p2"})
		case "p2":
			if r.URL.Query().Get("status") != "active" {
				t.Errorf("the second page lost the filter: %s", r.RequestURI)
			}
			writeJSON(w, 200, SessionList{Sessions: []Session{{ID: "s1"}}})
		}
	})
	var ids []string
	for s, err := range c.AllSessions(ctxT(t), ListOptions{Status: "active"}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	diff(t, "ids", ids, []string{"s3", "s2", "s1"})
}

func TestAllExecutionsStopsOnError(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("cursor") == "" {
			writeJSON(w, 200, ExecutionList{Executions: []Execution{{Seq: 1}}, NextCursor: "p2"})
			return
		}
		w.WriteHeader(500)
	})
	var seqs []int64
	var last error
	for x, err := range c.AllExecutions(ctxT(t), "s1") {
		if err != nil {
			last = err
			continue
		}
		seqs = append(seqs, x.Seq)
	}
	diff(t, "seqs", seqs, []int64{1})
	if last == nil {
		t.Error("the failed second page was not reported")
	}
}
