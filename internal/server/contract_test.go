package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/client"
)

// TestWrongMethodIs405: a path that exists answers another method with
// 405 method_not_allowed and Allow, as the document says; a path that
// does not exist stays 404.
func TestWrongMethodIs405(t *testing.T) {
	e := newEnv(t, options{})
	for _, tc := range []struct {
		method, path, allow string
		status              int
	}{
		{http.MethodDelete, "/v1/languages", "GET", 405},
		{http.MethodPut, "/v1/sessions", "GET, POST", 405},
		{http.MethodPost, "/v1/sessions/abc", "GET, DELETE", 405},
		{http.MethodPost, "/metrics", "GET", 405},
		{http.MethodGet, "/v1/no-such-thing", "", 404},
	} {
		req, _ := http.NewRequest(tc.method, e.url+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p client.Problem
		json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want %d Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.status, tc.allow)
		}
		if tc.status == 405 && (p.Code != "method_not_allowed" || !strings.Contains(p.Detail, tc.allow)) {
			t.Errorf("%s %s: problem %+v, want method_not_allowed naming %s", tc.method, tc.path, p, tc.allow)
		}
	}
}

// TestUploadCreatesParents: PUT of a file in folders that do not exist
// yet makes them, as the document says.
func TestUploadCreatesParents(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("pat")
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(ctx, s.ID, "a/b/c.txt", strings.NewReader("deep"), false); err != nil {
		t.Fatalf("upload into missing folders: %v", err)
	}
	var got bytes.Buffer
	if _, err := c.Download(ctx, s.ID, "a/b/c.txt", &got); err != nil || got.String() != "deep" {
		t.Fatalf("read back: %q, %v", got.String(), err)
	}
	if fi, err := c.Stat(ctx, s.ID, "a/b"); err != nil || fi.Type != "dir" {
		t.Fatalf("a/b: %+v, %v; want a directory", fi, err)
	}
}

// TestWebSocketRunsCellsInTurn: the socket stays open after a cell's
// done and runs the next execute, as the document says (the web
// notebook keeps one socket for all its cells).
func TestWebSocketRunsCellsInTurn(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/v1/sessions/" + s.ID + "/ws"
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	for i, code := range []string{"x = 20", "print(x + 22)"} {
		msg, _ := json.Marshal(client.WSMessage{Type: "execute", Execute: &client.ExecRequest{Code: code}})
		if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
			t.Fatalf("cell %d: %v", i, err)
		}
		var out string
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("cell %d: the socket ended before done: %v", i, err)
			}
			var ev client.Event
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			out += ev.Data
			if ev.Type == client.EventError {
				t.Fatalf("cell %d: %+v", i, ev.Error)
			}
			if ev.Type == client.EventDone {
				break
			}
		}
		if i == 1 && out != "42\n" {
			t.Fatalf("second cell printed %q, want 42", out)
		}
	}
	conn.Close(websocket.StatusNormalClosure, "")
}
