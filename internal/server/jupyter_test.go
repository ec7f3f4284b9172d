package server_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/server"
)

// jupyterDo is a request to the Jupyter routes with an Authorization
// header (none when auth is "").
func jupyterDo(t *testing.T, e *env, method, path, auth string, body string) (int, map[string]any, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return resp.StatusCode, m, b
}

func userKey(t *testing.T, e *env, name string) string {
	t.Helper()
	u, err := e.admin.CreateUser(ctxT(t), client.UserRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.admin.CreateKey(ctxT(t), u.ID, "jupyter")
	if err != nil {
		t.Fatal(err)
	}
	return k.Secret
}

// TestJupyterAuth: Jupyter clients send the key as "token KEY" (the
// notebook server's gateway client), as Bearer, or as ?token= (a
// browser's WebSocket); without one, or with a wrong one, the answer is
// a 401 in Jupyter's error form that says how to send it.
func TestJupyterAuth(t *testing.T) {
	e := newEnv(t, options{})
	code, m, b := jupyterDo(t, e, "GET", "/api/kernelspecs", "", "")
	if code != http.StatusUnauthorized || !strings.Contains(fmt.Sprint(m["message"]), "Authorization: token KEY") {
		t.Errorf("no key: %d %s", code, b)
	}
	code, _, b = jupyterDo(t, e, "GET", "/api/kernelspecs", "token not-a-key", "")
	if code != http.StatusUnauthorized {
		t.Errorf("a wrong key: %d %s", code, b)
	}
	for _, auth := range []string{"token " + e.key, "Bearer " + e.key} {
		code, m, b = jupyterDo(t, e, "GET", "/api/kernelspecs", auth, "")
		specs, _ := m["kernelspecs"].(map[string]any)
		if code != http.StatusOK || m["default"] != "python3" || specs["python3"] == nil {
			t.Errorf("%s: %d %s", strings.Fields(auth)[0], code, b)
		}
	}
	code, _, b = jupyterDo(t, e, "GET", "/api/kernelspecs?token="+e.key, "", "")
	if code != http.StatusOK {
		t.Errorf("?token=: %d %s", code, b)
	}
	code, m, b = jupyterDo(t, e, "GET", "/api/kernelspecs/cobol", "token "+e.key, "")
	if code != http.StatusNotFound || !strings.Contains(fmt.Sprint(m["message"]), "python3") {
		t.Errorf("an unknown kernelspec: want 404 naming the ones there are, got %d %s", code, b)
	}
}

// TestJupyterKernelIsTheUsersSession: a kernel is a kiln session of its
// user, in GET /v1/sessions with its kernelspec; to another user it does
// not exist (404 on every route, and the WebSocket is refused); a kernel
// id that is not a UUID is a 404 too.
func TestJupyterKernelIsTheUsersSession(t *testing.T) {
	e := newEnv(t, options{})
	owner := "token " + e.key
	code, k, b := jupyterDo(t, e, "POST", "/api/kernels", owner, `{"name": "python3"}`)
	if code != http.StatusCreated || k["name"] != "python3" {
		t.Fatalf("start a kernel: %d %s", code, b)
	}
	id := fmt.Sprint(k["id"])
	sid := strings.ReplaceAll(id, "-", "")
	s, err := e.admin.Session(ctxT(t), sid)
	if err != nil || s.Metadata["jupyter.kernelspec"] != "python3" || s.Languages[0] != "python" {
		t.Fatalf("the kernel's kiln session: %+v %v", s, err)
	}

	other := "token " + userKey(t, e, "bob")
	for _, r := range [][2]string{{"GET", ""}, {"DELETE", ""}, {"POST", "/interrupt"}, {"POST", "/restart"}} {
		if code, _, b := jupyterDo(t, e, r[0], "/api/kernels/"+id+r[1], other, ""); code != http.StatusNotFound {
			t.Errorf("another user's %s %s: %d %s, want 404", r[0], r[1], code, b)
		}
	}
	if code, _, b := jupyterDo(t, e, "GET", "/api/kernels", other, ""); code != http.StatusOK || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("another user's kernel list: %d %s, want []", code, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+"/api/kernels/"+id+"/channels",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {other}}}); err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("another user's channels: %v, want a 404", err)
	}
	if code, _, _ := jupyterDo(t, e, "GET", "/api/kernels/not-a-uuid", owner, ""); code != http.StatusNotFound {
		t.Errorf("a kernel id that is not a UUID: %d, want 404", code)
	}

	if code, b := jupyterList(t, e, owner); code != http.StatusOK || !strings.Contains(b, id) {
		t.Errorf("the owner's kernel list: %d %s", code, b)
	}
	if code, _, b := jupyterDo(t, e, "DELETE", "/api/kernels/"+id, owner, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, b)
	}
	if s, err := e.admin.Session(ctxT(t), sid); err != nil || s.Status != "ended" {
		t.Errorf("after delete the session is %+v %v, want ended", s, err)
	}
	if code, _, _ := jupyterDo(t, e, "GET", "/api/kernels/"+id, owner, ""); code != http.StatusNotFound {
		t.Errorf("a deleted kernel: %d, want 404", code)
	}
}

func jupyterList(t *testing.T, e *env, auth string) (int, string) {
	code, _, b := jupyterDo(t, e, "GET", "/api/kernels", auth, "")
	return code, string(b)
}

// jws is a test's Jupyter channels socket.
type jws struct {
	t  *testing.T
	ws *websocket.Conn
	n  int
}

func (c *jws) send(channel, msgType string, content any) string {
	c.n++
	id := fmt.Sprintf("req-%d", c.n)
	b, _ := json.Marshal(map[string]any{"channel": channel, "header": map[string]any{"msg_id": id, "msg_type": msgType,
		"session": "s", "username": "u", "date": time.Now().UTC().Format(time.RFC3339Nano), "version": "5.3"},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "content": content})
	if err := c.ws.Write(ctxT(c.t), websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
	return id
}

type jm struct {
	Channel      string
	Header       map[string]any
	ParentHeader map[string]any `json:"parent_header"`
	Content      map[string]any
}

// until reads messages until one of request id's on channel with type.
func (c *jws) until(id, channel, msgType string) (jm, []jm) {
	var seen []jm
	for {
		_, b, err := c.ws.Read(ctxT(c.t))
		if err != nil {
			c.t.Fatalf("waiting for %s: %v (seen %+v)", msgType, err, seen)
		}
		var m jm
		json.Unmarshal(b, &m)
		if m.ParentHeader["msg_id"] != id {
			continue
		}
		if m.Channel == channel && m.Header["msg_type"] == msgType {
			return m, seen
		}
		seen = append(seen, m)
	}
}

func executeContent(code string) map[string]any {
	return map[string]any{"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true}
}

// TestJupyterChannels (unboxed): execute gives execute_input, stream and
// execute_result with the execution count, between busy and idle with
// the request as parent; an error with stop_on_error aborts the request
// queued behind it, as IPython does; a message that is not a Jupyter
// message closes the socket with a reason that says so.
func TestJupyterChannels(t *testing.T) {
	e := newEnv(t, options{})
	code, k, b := jupyterDo(t, e, "POST", "/api/kernels", "token "+e.key, `{}`)
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, b)
	}
	ws, _, err := websocket.Dial(ctxT(t), "ws"+strings.TrimPrefix(e.url, "http")+"/api/kernels/"+fmt.Sprint(k["id"])+"/channels?token="+e.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	c := &jws{t: t, ws: ws}

	id := c.send("shell", "execute_request", executeContent("print('out')\n6 * 7"))
	reply, seen := c.until(id, "shell", "execute_reply")
	var kinds []string
	for _, m := range seen {
		kinds = append(kinds, fmt.Sprint(m.Header["msg_type"]))
	}
	if got := strings.Join(kinds, " "); got != "status execute_input stream execute_result" {
		t.Errorf("iopub before the reply: %q, want busy status, execute_input, stream, execute_result", got)
	}
	if reply.Content["status"] != "ok" || reply.Content["execution_count"] != 1.0 || len(seen) < 4 ||
		seen[3].Content["execution_count"] != 1.0 || seen[2].Content["text"] != "out\n" {
		t.Errorf("reply %+v, iopub %+v", reply.Content, seen)
	}
	if idle, _ := c.until(id, "iopub", "status"); idle.Content["execution_state"] != "idle" {
		t.Errorf("after the reply: %+v, want idle", idle.Content)
	}

	// A silent request runs, publishes nothing and takes no number.
	silent := executeContent("print('hidden')\n'hidden'")
	silent["silent"] = true
	id = c.send("shell", "execute_request", silent)
	reply, seen = c.until(id, "shell", "execute_reply")
	if len(seen) != 1 || seen[0].Header["msg_type"] != "status" {
		t.Errorf("a silent execute published %+v, want only its busy status", seen)
	}
	id = c.send("shell", "execute_request", executeContent("1"))
	if r, _ := c.until(id, "shell", "execute_reply"); r.Content["execution_count"] != 2.0 {
		t.Errorf("after a silent execute the count is %v, want 2", r.Content["execution_count"])
	}

	first := c.send("shell", "execute_request", executeContent("import time\ntime.sleep(0.5)\n1/0"))
	second := c.send("shell", "execute_request", executeContent("'ran'"))
	if r, _ := c.until(first, "shell", "execute_reply"); r.Content["status"] != "error" || r.Content["ename"] != "ZeroDivisionError" {
		t.Errorf("1/0: %+v", r.Content)
	}
	if r, _ := c.until(second, "shell", "execute_reply"); r.Content["status"] != "aborted" {
		t.Errorf("the request queued behind an error with stop_on_error: %+v, want aborted", r.Content)
	}

	if idle, _ := c.until(second, "iopub", "status"); idle.Content["execution_state"] != "idle" {
		t.Errorf("after the aborted reply: %+v, want idle", idle.Content)
	}
	ws.Write(ctxT(t), websocket.MessageText, []byte(`{"channel": "shell", "header": "nope"}`))
	for err == nil {
		_, _, err = ws.Read(ctxT(t))
	}
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "msg_id and msg_type") {
		t.Errorf("a malformed message: %v, want the socket closed with a reason naming the header", err)
	}
}

// TestJupyterSessions: a Jupyter session binds a notebook's path to a new
// kernel of a kernelspec, or to an existing kernel by id; it can be
// renamed; deleting it shuts its kernel down; another user sees none.
func TestJupyterSessions(t *testing.T) {
	e := newEnv(t, options{})
	auth := "token " + e.key
	code, s, b := jupyterDo(t, e, "POST", "/api/sessions", auth, `{"path": "a.ipynb", "type": "notebook", "name": "a", "kernel": {"name": "python3"}}`)
	kernel, _ := s["kernel"].(map[string]any)
	if code != http.StatusCreated || s["path"] != "a.ipynb" || kernel["name"] != "python3" {
		t.Fatalf("create: %d %s", code, b)
	}
	id, kid := fmt.Sprint(s["id"]), fmt.Sprint(kernel["id"])
	code, s2, b := jupyterDo(t, e, "POST", "/api/sessions", auth, `{"path": "b.ipynb", "type": "notebook", "kernel": {"id": "`+kid+`"}}`)
	if k2, _ := s2["kernel"].(map[string]any); code != http.StatusCreated || k2["id"] != kid {
		t.Errorf("a second session on the same kernel: %d %s", code, b)
	}
	code, s, b = jupyterDo(t, e, "PATCH", "/api/sessions/"+id, auth, `{"path": "renamed.ipynb"}`)
	if code != http.StatusOK || s["path"] != "renamed.ipynb" {
		t.Errorf("rename: %d %s", code, b)
	}
	other := "token " + userKey(t, e, "carol")
	if code, _, b := jupyterDo(t, e, "GET", "/api/sessions/"+id, other, ""); code != http.StatusNotFound {
		t.Errorf("another user's session: %d %s, want 404", code, b)
	}
	if code, _, b := jupyterDo(t, e, "GET", "/api/sessions", other, ""); code != http.StatusOK || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("another user's list: %d %s, want []", code, b)
	}
	if code, _, b := jupyterDo(t, e, "POST", "/api/sessions", other, `{"path": "x.ipynb", "kernel": {"id": "`+kid+`"}}`); code != http.StatusNotFound {
		t.Errorf("another user binding this user's kernel: %d %s, want 404", code, b)
	}
	if code, _, b := jupyterDo(t, e, "DELETE", "/api/sessions/"+id, auth, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, _, _ := jupyterDo(t, e, "GET", "/api/kernels/"+kid, auth, ""); code != http.StatusNotFound {
		t.Errorf("the deleted session's kernel: %d, want 404 (shut down)", code)
	}
	if code, _, b := jupyterDo(t, e, "GET", "/api/sessions", auth, ""); code != http.StatusOK || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("after delete, the sessions on that kernel are gone too: %d %s", code, b)
	}
}

// TestJupyterControlIsRateLimited: interrupt and shutdown requests on a
// socket count against the caller's rate limit, as the REST routes do,
// so a client cannot flood the session (and its audit log) through one
// handshake; past the limit each is answered with a RateLimited error.
func TestJupyterControlIsRateLimited(t *testing.T) {
	e := newEnv(t, options{http: server.Config{RatePerSecond: 0.01, RateBurst: 6}})
	code, k, b := jupyterDo(t, e, "POST", "/api/kernels", "token "+e.key, `{}`)
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, b)
	}
	ws, _, err := websocket.Dial(ctxT(t), "ws"+strings.TrimPrefix(e.url, "http")+"/api/kernels/"+fmt.Sprint(k["id"])+"/channels?token="+e.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	c := &jws{t: t, ws: ws}
	statuses := map[string]int{}
	for i := 0; i < 10; i++ {
		id := c.send("control", "interrupt_request", map[string]any{})
		r, _ := c.until(id, "control", "interrupt_reply")
		statuses[fmt.Sprint(r.Content["status"], r.Content["ename"])]++
	}
	if statuses["ok<nil>"] == 0 || statuses["errorRateLimited"] == 0 || statuses["ok<nil>"] > 6 {
		t.Errorf("10 interrupts with a burst of 6 (2 spent on the start and the handshake): %v, want some ok, the rest RateLimited", statuses)
	}
}

// TestJupyterChannelsV1: a client that offers Jupyter Server's binary
// protocol (v1.kernel.websocket.jupyter.org, as JupyterLab does) gets it,
// both ways.
func TestJupyterChannelsV1(t *testing.T) {
	e := newEnv(t, options{})
	code, k, b := jupyterDo(t, e, "POST", "/api/kernels", "token "+e.key, `{}`)
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, b)
	}
	ws, _, err := websocket.Dial(ctxT(t), "ws"+strings.TrimPrefix(e.url, "http")+"/api/kernels/"+fmt.Sprint(k["id"])+"/channels",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"token " + e.key}}, Subprotocols: []string{"v1.kernel.websocket.jupyter.org"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if ws.Subprotocol() != "v1.kernel.websocket.jupyter.org" {
		t.Fatalf("subprotocol %q, want v1.kernel.websocket.jupyter.org", ws.Subprotocol())
	}
	parts := []string{"shell", `{"msg_id": "v1-1", "msg_type": "execute_request", "session": "s", "username": "u", "date": "", "version": "5.3"}`,
		`{}`, `{}`, `{"code": "6 * 7", "silent": false}`}
	n := len(parts) + 1
	msg := make([]byte, 8*(n+1))
	binary.LittleEndian.PutUint64(msg, uint64(n))
	off := uint64(len(msg))
	for i, p := range parts {
		binary.LittleEndian.PutUint64(msg[8*(i+1):], off)
		off += uint64(len(p))
	}
	binary.LittleEndian.PutUint64(msg[8*n:], off)
	msg = append(msg, strings.Join(parts, "")...)
	if err := ws.Write(ctxT(t), websocket.MessageBinary, msg); err != nil {
		t.Fatal(err)
	}
	for {
		typ, b, err := ws.Read(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if typ != websocket.MessageBinary {
			t.Fatalf("a %v message on a v1 socket", typ)
		}
		at := func(i uint64) uint64 { return binary.LittleEndian.Uint64(b[8*(i+1):]) }
		var h, content map[string]any
		json.Unmarshal(b[at(1):at(2)], &h)
		json.Unmarshal(b[at(4):at(5)], &content)
		if h["msg_type"] == "execute_result" {
			if data, _ := content["data"].(map[string]any); data["text/plain"] != "42" || string(b[at(0):at(1)]) != "iopub" {
				t.Errorf("execute_result over v1: channel %q, content %v", b[at(0):at(1)], content)
			}
			return
		}
	}
}

// TestJupyterKernelEndedThroughKilnAPI: a kernel whose session ends
// through kiln's own API (or its idle TTL) is gone from the gateway too,
// and its open channels are closed when the kernels are listed.
func TestJupyterKernelEndedThroughKilnAPI(t *testing.T) {
	e := newEnv(t, options{})
	auth := "token " + e.key
	code, k, b := jupyterDo(t, e, "POST", "/api/kernels", auth, `{}`)
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, b)
	}
	id := fmt.Sprint(k["id"])
	ws, _, err := websocket.Dial(ctxT(t), "ws"+strings.TrimPrefix(e.url, "http")+"/api/kernels/"+id+"/channels?token="+e.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := e.admin.DeleteSession(ctxT(t), strings.ReplaceAll(id, "-", "")); err != nil {
		t.Fatal(err)
	}
	if code, b := jupyterList(t, e, auth); code != http.StatusOK || strings.Contains(b, id) {
		t.Errorf("the kernel list after its session ended: %d %s", code, b)
	}
	for err == nil {
		_, _, err = ws.Read(ctxT(t))
	}
	if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("the ended kernel's socket: %v, want closed normally", err)
	}
	if code, _, _ := jupyterDo(t, e, "GET", "/api/kernels/"+id, auth, ""); code != http.StatusNotFound {
		t.Errorf("GET the ended kernel: %d, want 404", code)
	}
}

// TestJupyterHistory: history_request answers from the kiln session's
// history: the last n cells with their numbers, or a range.
func TestJupyterHistory(t *testing.T) {
	e := newEnv(t, options{})
	code, k, b := jupyterDo(t, e, "POST", "/api/kernels", "token "+e.key, `{}`)
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, b)
	}
	ws, _, err := websocket.Dial(ctxT(t), "ws"+strings.TrimPrefix(e.url, "http")+"/api/kernels/"+fmt.Sprint(k["id"])+"/channels?token="+e.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	c := &jws{t: t, ws: ws}
	for _, code := range []string{"a = 1", "b = 2", "a + b"} {
		c.until(c.send("shell", "execute_request", executeContent(code)), "shell", "execute_reply")
	}
	r, _ := c.until(c.send("shell", "history_request", map[string]any{"hist_access_type": "tail", "n": 2, "output": false, "raw": true}), "shell", "history_reply")
	if got, _ := json.Marshal(r.Content["history"]); string(got) != `[[0,2,"b = 2"],[0,3,"a + b"]]` {
		t.Errorf("tail 2: %s", got)
	}
	r, _ = c.until(c.send("shell", "history_request", map[string]any{"hist_access_type": "range", "session": 0, "start": 1, "stop": 2}), "shell", "history_reply")
	if got, _ := json.Marshal(r.Content["history"]); string(got) != `[[0,1,"a = 1"]]` {
		t.Errorf("range 1-2: %s", got)
	}
}
