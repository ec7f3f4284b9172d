package jupyter_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/client"
)

// jupyterBin is the notebook's command, as the README has users run it
// (Debian's jupyter-core and jupyter-notebook).
const jupyterBin = "/usr/bin/jupyter"

// notebookServer is Debian's Jupyter Notebook server started with its
// gateway option pointed at a kiln.
type notebookServer struct {
	url, token string
}

// startNotebook runs the README's command, `JUPYTER_GATEWAY_AUTH_TOKEN=KEY
// jupyter notebook --gateway-url URL`, on a free port (as root, with
// --allow-root).
func startNotebook(t *testing.T, kilnURL, key string) *notebookServer {
	t.Helper()
	if _, err := os.Stat(jupyterBin); err != nil {
		t.Skipf("needs %s from Debian's jupyter-core and jupyter-notebook (scripts/deps --test installs them)", jupyterBin)
	}
	dir := t.TempDir()
	port := freePort(t)
	nb := &notebookServer{url: fmt.Sprintf("http://127.0.0.1:%d", port), token: "nb-test-token"}
	cmd := exec.Command(jupyterBin, "notebook", "--gateway-url", kilnURL,
		"--no-browser", "--allow-root", "--ip=127.0.0.1", fmt.Sprintf("--port=%d", port), "--port-retries=0",
		"--NotebookApp.token="+nb.token, "--notebook-dir="+dir)
	// The notebook server's own files go to the test's directory, not root's home.
	cmd.Env = append(os.Environ(), "JUPYTER_GATEWAY_AUTH_TOKEN="+key, "HOME="+dir, "JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"),
		"JUPYTER_DATA_DIR="+filepath.Join(dir, "data"), "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"))
	logs := &syncBuilder{}
	cmd.Stdout, cmd.Stderr = writerOf(logs), writerOf(logs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("the notebook server's log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		if code, _ := nb.do(t, "GET", "/api/status", nil); code == http.StatusOK {
			return nb
		}
		if time.Now().After(deadline) {
			t.Fatalf("the notebook server did not start:\n%s", logs.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

type funcWriter func([]byte) (int, error)

func (f funcWriter) Write(p []byte) (int, error) { return f(p) }

func writerOf(b *syncBuilder) io.Writer {
	return funcWriter(func(p []byte) (int, error) { b.WriteString(string(p)); return len(p), nil })
}

// do is a request to the notebook server's own REST API.
func (nb *notebookServer) do(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, nb.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+nb.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// openNotebook makes a notebook session of the notebook server with a
// kernel of the kernelspec, as the notebook's page does when it opens a
// notebook, and returns the kernel's id.
func (nb *notebookServer) openNotebook(t *testing.T, path, kernelspec string) string {
	t.Helper()
	code, b := nb.do(t, "POST", "/api/sessions", map[string]any{"path": path, "type": "notebook", "name": path,
		"kernel": map[string]string{"name": kernelspec}})
	if code != http.StatusCreated {
		t.Fatalf("POST /api/sessions for %s: %d %s", kernelspec, code, b)
	}
	var s struct {
		Kernel struct{ ID, Name string }
	}
	json.Unmarshal(b, &s)
	if s.Kernel.ID == "" || s.Kernel.Name != kernelspec {
		t.Fatalf("the session has no %s kernel: %s", kernelspec, b)
	}
	return s.Kernel.ID
}

// jmsg is a Jupyter message as JSON.
type jmsg struct {
	Channel      string         `json:"channel"`
	Header       map[string]any `json:"header"`
	ParentHeader map[string]any `json:"parent_header"`
	Metadata     map[string]any `json:"metadata"`
	Content      map[string]any `json:"content"`
}

func (m jmsg) msgType() string { s, _ := m.Header["msg_type"].(string); return s }
func (m jmsg) parent() string  { s, _ := m.ParentHeader["msg_id"].(string); return s }

// channels is the notebook page's WebSocket to a kernel, through the
// notebook server (which relays it to kiln).
type channels struct {
	t       *testing.T
	ws      *websocket.Conn
	session string
	n       int
}

func (nb *notebookServer) channels(t *testing.T, kernelID string) *channels {
	t.Helper()
	session := fmt.Sprintf("test-session-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(nb.url, "http", "ws", 1)+"/api/kernels/"+kernelID+"/channels?session_id="+session,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"token " + nb.token}}})
	if err != nil {
		t.Fatalf("the notebook server's kernel WebSocket: %v", err)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &channels{t: t, ws: ws, session: session}
}

// send sends a request as the notebook's page does and returns its id.
func (c *channels) send(channel, msgType string, content any) string {
	c.n++
	id := fmt.Sprintf("%s_%d", c.session, c.n)
	m := map[string]any{"channel": channel, "header": map[string]any{"msg_id": id, "username": "tester", "session": c.session,
		"msg_type": msgType, "version": "5.2", "date": time.Now().UTC().Format(time.RFC3339Nano)},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "content": content, "buffers": []any{}}
	b, _ := json.Marshal(m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("send %s: %v", msgType, err)
	}
	return id
}

func (c *channels) read(ctx context.Context) jmsg {
	c.t.Helper()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		c.t.Fatalf("reading the kernel's messages: %v", err)
	}
	var m jmsg
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("a message that is not JSON: %q", b)
	}
	return m
}

// collect reads the messages caused by request id until its reply and
// its idle status have come; before, when set, sees each as it comes.
func (c *channels) collect(id string, timeout time.Duration, before func(jmsg)) (reply jmsg, iopub []jmsg) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	idle := false
	for reply.Header == nil || !idle {
		m := c.read(ctx)
		if m.parent() != id {
			continue
		}
		if before != nil {
			before(m)
		}
		switch {
		case m.Channel == "iopub" && m.msgType() == "status":
			idle = m.Content["execution_state"] == "idle"
		case m.Channel == "iopub":
			iopub = append(iopub, m)
		case m.Channel == "shell":
			reply = m
		}
	}
	return reply, iopub
}

func (c *channels) execute(code string, timeout time.Duration) (jmsg, []jmsg) {
	id := c.send("shell", "execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	return c.collect(id, timeout, nil)
}

func outputsOf(iopub []jmsg, msgType string) []jmsg {
	var out []jmsg
	for _, m := range iopub {
		if m.msgType() == msgType {
			out = append(out, m)
		}
	}
	return out
}

func streamText(iopub []jmsg) string {
	var s strings.Builder
	for _, m := range outputsOf(iopub, "stream") {
		s.WriteString(fmt.Sprint(m.Content["text"]))
	}
	return s.String()
}

func resultText(t *testing.T, iopub []jmsg) string {
	t.Helper()
	rs := outputsOf(iopub, "execute_result")
	if len(rs) != 1 {
		t.Fatalf("want one execute_result, got %d: %+v", len(rs), iopub)
	}
	data, _ := rs[0].Content["data"].(map[string]any)
	return fmt.Sprint(data["text/plain"])
}

// TestNotebookServerThroughGateway: Debian's notebook server started with
// --gateway-url pointed at kiln. Through the notebook server's own REST
// and WebSocket API: kiln's kernelspecs are the server's; a Python
// notebook runs cells, a matplotlib figure comes as display_data with a
// PNG, a while-True loop is interrupted (KeyboardInterrupt) and the
// kernel restarted (state gone, count from 1); the kernel runs in a kiln
// sandbox (another PID namespace than the host's, uid 1000) as a kiln
// session of the key's user, with its cells in the session's history;
// a JavaScript notebook runs cells too.
func TestNotebookServerThroughGateway(t *testing.T) {
	need(t, map[string]string{"notebook": "python3-notebook", "matplotlib": "python3-matplotlib"})
	s := startServe(t)
	nb := startNotebook(t, s.url, s.key)

	code, b := nb.do(t, "GET", "/api/kernelspecs", nil)
	var specs struct {
		Default     string
		Kernelspecs map[string]struct {
			Spec struct {
				DisplayName string `json:"display_name"`
			}
		}
	}
	json.Unmarshal(b, &specs)
	if code != http.StatusOK || specs.Default != "python3" || specs.Kernelspecs["python3"].Spec.DisplayName != "Python 3 (kiln)" ||
		specs.Kernelspecs["javascript"].Spec.DisplayName == "" {
		t.Fatalf("the notebook server's kernelspecs are not kiln's: %d %s", code, b)
	}

	t.Run("python", func(t *testing.T) {
		kid := nb.openNotebook(t, "py.ipynb", "python3")
		ch := nb.channels(t, kid)
		reply, _ := ch.collect(ch.send("shell", "kernel_info_request", map[string]any{}), time.Minute, nil)
		if li, _ := reply.Content["language_info"].(map[string]any); li["name"] != "python" {
			t.Fatalf("kernel_info_reply: %+v", reply)
		}

		reply, iopub := ch.execute("x = 40\nx + 2", 2*time.Minute)
		if got := resultText(t, iopub); got != "42" || reply.Content["status"] != "ok" || reply.Content["execution_count"] != 1.0 {
			t.Fatalf("x + 2: result %q, reply %+v", got, reply.Content)
		}

		// The kernel lives in a kiln sandbox, not on the host.
		hostNS, err := os.Readlink("/proc/self/ns/pid")
		if err != nil {
			t.Fatal(err)
		}
		_, iopub = ch.execute("import os\nprint(os.readlink('/proc/self/ns/pid'), os.getuid())", time.Minute)
		fields := strings.Fields(streamText(iopub))
		if len(fields) != 2 || fields[0] == hostNS || fields[1] != "1000" {
			t.Errorf("the kernel's PID namespace and uid are %q; the host's namespace is %s: the kernel must be in a sandbox as uid 1000", fields, hostNS)
		}
		kc, err := client.New(s.url, s.key)
		if err != nil {
			t.Fatal(err)
		}
		sid := strings.ReplaceAll(kid, "-", "")
		sess, err := kc.Session(context.Background(), sid)
		if err != nil || sess.Status != "active" || sess.Metadata["jupyter.kernelspec"] != "python3" {
			t.Fatalf("kiln has no active session %s of this key's user for the kernel: %+v %v", sid, sess, err)
		}
		hist, err := kc.History(context.Background(), sid, 0, "")
		if err != nil || len(hist.Executions) < 2 || hist.Executions[0].Code != "x = 40\nx + 2" {
			t.Errorf("the kernel's cells are not in the kiln session's history: %+v %v", hist, err)
		}

		_, iopub = ch.execute("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()", 2*time.Minute)
		displays := outputsOf(iopub, "display_data")
		if len(displays) != 1 {
			t.Fatalf("a matplotlib figure: want one display_data, got %+v", iopub)
		}
		data, _ := displays[0].Content["data"].(map[string]any)
		png, err := base64.StdEncoding.DecodeString(fmt.Sprint(data["image/png"]))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("the figure's image/png is not a base64 PNG (%v): %.80q", err, fmt.Sprint(data["image/png"]))
		}

		// Interrupt a loop through the notebook server's REST API.
		// Interrupted once it runs (it says so): an interrupt before the
		// cell starts would find nothing to stop.
		id := ch.send("shell", "execute_request", map[string]any{"code": "print('looping', flush=True)\nwhile True:\n    pass", "silent": false,
			"store_history": true, "user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
		interrupted := false
		reply, iopub = ch.collect(id, 2*time.Minute, func(m jmsg) {
			if m.msgType() == "stream" && !interrupted {
				interrupted = true
				if code, b := nb.do(t, "POST", "/api/kernels/"+kid+"/interrupt", nil); code != http.StatusNoContent {
					t.Errorf("interrupt: %d %s", code, b)
				}
			}
		})
		errs := outputsOf(iopub, "error")
		if reply.Content["status"] != "error" || len(errs) != 1 || errs[0].Content["ename"] != "KeyboardInterrupt" {
			t.Fatalf("an interrupted loop: want a KeyboardInterrupt error, got reply %+v, iopub %+v", reply.Content, iopub)
		}
		_, iopub = ch.execute("x", time.Minute)
		if got := resultText(t, iopub); got != "40" {
			t.Errorf("after the interrupt the kernel keeps its state: x is %q, want 40", got)
		}

		if code, b := nb.do(t, "POST", "/api/kernels/"+kid+"/restart", nil); code != http.StatusOK {
			t.Fatalf("restart: %d %s", code, b)
		}
		reply, iopub = ch.execute("'x' in dir()", 2*time.Minute)
		if got := resultText(t, iopub); got != "False" || reply.Content["execution_count"] != 1.0 {
			t.Errorf("after a restart: 'x' in dir() is %q (want False) at count %v (want 1)", got, reply.Content["execution_count"])
		}

		if code, b := nb.do(t, "DELETE", "/api/kernels/"+kid, nil); code != http.StatusNoContent {
			t.Errorf("delete: %d %s", code, b)
		}
		if sess, err := kc.Session(context.Background(), sid); err != nil || sess.Status != "ended" {
			t.Errorf("the kernel's kiln session after delete: %+v %v; want ended", sess, err)
		}
	})

	t.Run("javascript", func(t *testing.T) {
		kid := nb.openNotebook(t, "js.ipynb", "javascript")
		ch := nb.channels(t, kid)
		reply, iopub := ch.execute("const a = [1, 2, 3];\nconsole.log('sum', a.reduce((x, y) => x + y));\na.length * 2", 2*time.Minute)
		if reply.Content["status"] != "ok" || streamText(iopub) != "sum 6\n" || resultText(t, iopub) != "6" {
			t.Errorf("a JavaScript cell: reply %+v, iopub %+v", reply.Content, iopub)
		}
		reply, iopub = ch.execute("a.push(4); a.length", time.Minute)
		if resultText(t, iopub) != "4" || reply.Content["execution_count"] != 2.0 {
			t.Errorf("JavaScript state across cells: %+v %+v", reply.Content, iopub)
		}
		hostNS, _ := os.Readlink("/proc/self/ns/pid")
		_, iopub = ch.execute("console.log(require('fs').readlinkSync('/proc/self/ns/pid'), process.getuid())", time.Minute)
		if f := strings.Fields(streamText(iopub)); len(f) != 2 || f[0] == hostNS || f[1] != "1000" {
			t.Errorf("the JavaScript kernel's PID namespace and uid are %q; the host's namespace is %s: it must be in a sandbox as uid 1000", f, hostNS)
		}
		reply, iopub = ch.execute("null.x", time.Minute)
		if errs := outputsOf(iopub, "error"); reply.Content["status"] != "error" || len(errs) != 1 || errs[0].Content["ename"] != "TypeError" {
			t.Errorf("a JavaScript error: %+v %+v", reply.Content, iopub)
		}
	})
}
