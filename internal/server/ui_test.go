package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/client"
)

// browser is a cookie-holding HTTP client, as the web notebook is.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, hc: &http.Client{Jar: jar}}
}

func (b *browser) cookie(name string) string {
	u, _ := url.Parse(b.base)
	for _, c := range b.hc.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// do sends a request; csrf adds the CSRF header from the readable cookie.
func (b *browser) do(method, path, body string, csrf bool) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if csrf {
		req.Header.Set("X-Kiln-Csrf", b.cookie("kiln_csrf"))
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func (b *browser) signIn(key string) *http.Response {
	b.t.Helper()
	body, _ := json.Marshal(map[string]string{"key": key})
	resp, text := b.do("POST", "/ui/signin", string(body), false)
	if resp.StatusCode != http.StatusNoContent {
		b.t.Fatalf("sign in = %d: %s", resp.StatusCode, text)
	}
	return resp
}

// TestUICookieSignIn: signing in with an API key gives an HttpOnly,
// SameSite=Strict session cookie that authenticates API requests, a
// readable CSRF cookie, and no key in any cookie; a wrong key is refused.
func TestUICookieSignIn(t *testing.T) {
	e := newEnv(t, options{})
	b := newBrowser(t, e.url)
	if resp, _ := b.do("GET", "/v1/users/me", "", false); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/users/me before sign-in = %d, want 401", resp.StatusCode)
	}
	if resp, text := b.do("POST", "/ui/signin", `{"key":"kiln_wrong"}`, false); resp.StatusCode != http.StatusUnauthorized || b.cookie("kiln_session") != "" {
		t.Fatalf("sign in with a wrong key = %d (%s), cookie %q; want 401 and no cookie", resp.StatusCode, text, b.cookie("kiln_session"))
	}
	// Another site's page cannot sign the browser in (login CSRF).
	req, _ := http.NewRequest("POST", e.url+"/ui/signin", strings.NewReader(`{"key":"`+e.key+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "https://evil.example")
	if r, err := b.hc.Do(req); err != nil || r.StatusCode != http.StatusForbidden || b.cookie("kiln_session") != "" {
		t.Fatalf("sign in from another origin: %v %v, cookie %q; want 403 and no cookie", err, r, b.cookie("kiln_session"))
	}
	resp := b.signIn(e.key)
	var session, csrf *http.Cookie
	for _, c := range resp.Cookies() {
		switch c.Name {
		case "kiln_session":
			session = c
		case "kiln_csrf":
			csrf = c
		}
		if strings.Contains(c.Value, e.key) {
			t.Errorf("cookie %s holds the API key", c.Name)
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/" {
		t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Strict, Path=/", session)
	}
	if csrf == nil || csrf.HttpOnly || csrf.SameSite != http.SameSiteStrictMode {
		t.Fatalf("CSRF cookie = %+v, want readable by the page, SameSite=Strict", csrf)
	}
	resp, text := b.do("GET", "/v1/users/me", "", false)
	if resp.StatusCode != http.StatusOK || !strings.Contains(text, `"admin"`) {
		t.Fatalf("GET /v1/users/me with the cookie = %d: %s", resp.StatusCode, text)
	}
	// Bearer auth still works beside it.
	if _, err := e.admin.Languages(ctxT(t)); err != nil {
		t.Fatalf("bearer auth: %v", err)
	}
}

// TestUICSRF: a state-changing request authenticated by the cookie is
// refused without the CSRF header, or with a wrong one, and allowed with
// the right one.
func TestUICSRF(t *testing.T) {
	e := newEnv(t, options{})
	b := newBrowser(t, e.url)
	b.signIn(e.key)
	resp, text := b.do("POST", "/v1/users", `{"name":"mallory"}`, false)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(text, "X-Kiln-Csrf") {
		t.Fatalf("POST without the CSRF header = %d (%s), want 403 naming the header", resp.StatusCode, text)
	}
	req, _ := http.NewRequest("POST", e.url+"/v1/users", strings.NewReader(`{"name":"mallory"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Kiln-Csrf", "not-the-token")
	r2, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusForbidden {
		t.Fatalf("POST with a wrong CSRF header = %d, want 403", r2.StatusCode)
	}
	users, err := e.admin.Users(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if u.Name == "mallory" {
			t.Fatal("a request without a valid CSRF token created a user")
		}
	}
	if resp, text := b.do("POST", "/v1/users", `{"name":"alice"}`, true); resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST with the CSRF header = %d: %s", resp.StatusCode, text)
	}
}

// TestUISignOut: sign-out ends the sign-in on the server, so the old
// cookie no longer authenticates even if it was copied; sign-out itself
// needs the CSRF header; revoking the key ends a sign-in made with it.
func TestUISignOut(t *testing.T) {
	e := newEnv(t, options{})
	b := newBrowser(t, e.url)
	b.signIn(e.key)
	old := b.cookie("kiln_session")
	if resp, _ := b.do("POST", "/ui/signout", "", false); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-out without the CSRF header = %d, want 403", resp.StatusCode)
	}
	if resp, _ := b.do("POST", "/ui/signout", "", true); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out = %d, want 204", resp.StatusCode)
	}
	if b.cookie("kiln_session") != "" {
		t.Error("the session cookie is still set after sign-out")
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/users/me", nil)
	req.AddCookie(&http.Cookie{Name: "kiln_session", Value: old})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the old cookie after sign-out = %d, want 401", resp.StatusCode)
	}

	// A user's key revoked: its sign-in ends too.
	ctx := ctxT(t)
	u, err := e.admin.CreateUser(ctx, client.UserRequest{Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.admin.CreateKey(ctx, u.ID, "browser")
	if err != nil {
		t.Fatal(err)
	}
	b2 := newBrowser(t, e.url)
	b2.signIn(k.Secret)
	if resp, _ := b2.do("GET", "/v1/users/me", "", false); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's cookie = %d, want 200", resp.StatusCode)
	}
	if err := e.admin.RevokeKey(ctx, u.ID, k.ID); err != nil {
		t.Fatal(err)
	}
	if resp, _ := b2.do("GET", "/v1/users/me", "", false); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bob's cookie after his key was revoked = %d, want 401", resp.StatusCode)
	}
}

// TestUIWebSocketCookie: the execution WebSocket authenticates by the
// session cookie (browsers cannot set a bearer header on one), and a
// handshake from another origin is refused.
func TestUIWebSocketCookie(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	sess, err := e.admin.CreateSession(ctx, client.SessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, e.url)
	b.signIn(e.key)
	ws := "ws" + strings.TrimPrefix(e.url, "http") + "/v1/sessions/" + sess.ID + "/ws"
	h := http.Header{"Origin": {e.url}, "Cookie": {"kiln_session=" + b.cookie("kiln_session")}}
	conn, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("WebSocket with the cookie: %v", err)
	}
	defer conn.CloseNow()
	msg, _ := json.Marshal(client.WSMessage{Type: "execute", Execute: &client.ExecRequest{Code: "print(6*7)"}})
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (stdout so far %q)", err, out.String())
		}
		var ev client.Event
		json.Unmarshal(data, &ev)
		out.WriteString(ev.Data)
		if ev.Type == client.EventDone || ev.Type == client.EventError {
			break
		}
	}
	if !strings.Contains(out.String(), "42") {
		t.Fatalf("stdout = %q, want 42", out.String())
	}
	conn.Close(websocket.StatusNormalClosure, "")

	h.Set("Origin", "https://evil.example")
	if c, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: h}); err == nil {
		c.CloseNow()
		t.Fatal("a WebSocket handshake from another origin was accepted with the cookie")
	}
	if c, resp, err := websocket.Dial(context.Background(), ws, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		if c != nil {
			c.CloseNow()
		}
		t.Fatalf("a WebSocket without cookie or key: err %v, want 401", err)
	}
}

// TestUIPages: / serves the notebook (or, in a binary built without it, a
// page that says how to build it) under a Content-Security-Policy with no
// inline script; the HTML-output frame has a sandboxing policy of its own.
func TestUIPages(t *testing.T) {
	e := newEnv(t, options{})
	resp, err := http.Get(e.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(csp, "script-src 'self';") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("GET / CSP = %q, want script-src 'self' only and frame-ancestors 'none'", csp)
	}
	page := string(body)
	if !strings.Contains(page, "was not built") && !strings.Contains(page, `<script type="module"`) {
		t.Errorf("GET / is neither the notebook nor the not-built page:\n%s", page)
	}
	if strings.Contains(page, "was not built") && !strings.Contains(page, "npm run build") {
		t.Errorf("the not-built page does not say how to build the UI:\n%s", page)
	}
	resp, err = http.Get(e.url + "/ui/frame.html")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if fcsp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(fcsp, "sandbox allow-scripts;") || !strings.Contains(fcsp, "connect-src 'none'") {
		t.Errorf("frame CSP = %q, want a sandbox without allow-same-origin and connect-src 'none'", fcsp)
	}
	for _, p := range []string{"/nothing-here", "/assets/../../go.mod"} {
		resp, err = http.Get(e.url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}
}
