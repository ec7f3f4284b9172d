package server_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/client"
)

// TestTerminalWebSocket: GET /v1/sessions/{id}/terminal attaches a
// collaborator (bearer key) to a shell in the session's sandbox: typed
// bytes in binary frames, output back, a resize control frame that stty
// sees, and an exit frame when the shell ends. A viewer is refused (403),
// a stranger does not see the session (404), no key is 401, a page of
// another origin is refused, and a bad size is 400. The owner's
// browser gets in with the notebook's sign-in cookie.
func TestTerminalWebSocket(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs /bin/bash")
	}
	e := newEnv(t, options{})
	ctx := ctxT(t)
	sess, err := e.admin.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	keyed := func(name, role string) string {
		u, err := e.admin.CreateUser(ctx, client.UserRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		k, err := e.admin.CreateKey(ctx, u.ID, "test")
		if err != nil {
			t.Fatal(err)
		}
		if role != "" {
			if _, err := e.admin.ShareSession(ctx, sess.ID, u.ID, role); err != nil {
				t.Fatal(err)
			}
		}
		return k.Secret
	}
	viewer, collab, stranger := keyed("viewer", "viewer"), keyed("collab", "collaborator"), keyed("stranger", "")
	ws := "ws" + strings.TrimPrefix(e.url, "http") + "/v1/sessions/" + sess.ID + "/terminal"
	dial := func(url string, h http.Header) (*websocket.Conn, int) {
		c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
		if err == nil {
			return c, http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatalf("dial %s: %v", url, err)
		}
		return nil, resp.StatusCode
	}
	bearer := func(k string) http.Header { return http.Header{"Authorization": {"Bearer " + k}} }
	for _, tc := range []struct {
		what string
		url  string
		h    http.Header
		want int
	}{
		{"viewer", ws, bearer(viewer), http.StatusForbidden},
		{"stranger", ws, bearer(stranger), http.StatusNotFound},
		{"no key", ws, nil, http.StatusUnauthorized},
		{"another origin", ws, http.Header{"Authorization": {"Bearer " + collab}, "Origin": {"https://evil.example"}}, http.StatusForbidden},
		{"rows=0", ws + "?rows=0", bearer(collab), http.StatusBadRequest},
	} {
		if c, status := dial(tc.url, tc.h); status != tc.want {
			if c != nil {
				c.CloseNow()
			}
			t.Errorf("%s: status %d, want %d", tc.what, status, tc.want)
		}
	}

	// The notebook's way in: the sign-in cookie from a page of this origin.
	b := newBrowser(t, e.url)
	b.signIn(e.key)
	if c, status := dial(ws, http.Header{"Origin": {e.url}, "Cookie": {"kiln_session=" + b.cookie("kiln_session")}}); c == nil {
		t.Errorf("owner with the notebook's cookie: status %d, want 101", status)
	} else {
		c.Close(websocket.StatusNormalClosure, "")
	}

	conn, status := dial(ws+"?rows=20&cols=70", bearer(collab))
	if conn == nil {
		t.Fatalf("collaborator: status %d, want 101", status)
	}
	defer conn.CloseNow()
	var out strings.Builder
	var exit string
	await := func(want string) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for !strings.Contains(out.String(), want) {
			typ, data, err := conn.Read(rctx)
			if err != nil {
				t.Fatalf("waiting for %q: %v; output so far %q", want, err, out.String())
			}
			if typ == websocket.MessageText {
				exit = string(data)
				continue
			}
			out.Write(data)
		}
	}
	conn.Write(ctx, websocket.MessageBinary, []byte("echo hi-$((6*7))\n"))
	await("hi-42\r\n")
	conn.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","rows":30,"cols":90}`))
	conn.Write(ctx, websocket.MessageBinary, []byte("stty size\n"))
	await("30 90\r\n")
	conn.Write(ctx, websocket.MessageBinary, []byte("exit 3\n"))
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		typ, data, err := conn.Read(rctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Errorf("the socket closed with %v, want a normal closure", err)
			}
			break
		}
		if typ == websocket.MessageText {
			exit = string(data)
		}
	}
	if exit != `{"type":"exit","code":3}` {
		t.Errorf("exit frame %q, want {\"type\":\"exit\",\"code\":3}", exit)
	}
}
