package server_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// TestPackagesRefusals: bad package requests are 400s that say what is
// wrong and what is allowed; under the network policy none an install,
// an execute with packages and a run with packages are 403s naming the
// policy, at once, and nothing runs.
func TestPackagesRefusals(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("alice")
	sess, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		req  client.PackageRequest
		want string
	}{
		{client.PackageRequest{Manager: "apt", Packages: []string{"curl"}}, `use "pip" or "npm"`},
		{client.PackageRequest{Manager: "pip", Packages: []string{"--index-url=http://x.invalid/"}}, "looks like an option"},
		{client.PackageRequest{Manager: "npm", Packages: []string{"evil@file:../x"}}, "URL or a path"},
		{client.PackageRequest{Manager: "pip", Requirements: "../requirements.txt"}, ".."},
	} {
		_, err := c.InstallPackages(ctx, sess.ID, r.req)
		if p := wantProblem(t, fmt.Sprint(r.req), err, 400, "invalid"); !strings.Contains(p.Detail, r.want) {
			t.Errorf("%+v: %q; want it to say %q", r.req, p.Detail, r.want)
		}
	}
	for _, m := range []string{"pip", "npm"} {
		start := time.Now()
		_, err := c.InstallPackages(ctx, sess.ID, client.PackageRequest{Manager: m, Packages: []string{"requests"}})
		p := wantProblem(t, m+" install under none", err, 403, "forbidden")
		if !strings.Contains(p.Detail, `network policy is "none"`) || time.Since(start) > 2*time.Second {
			t.Errorf("%s install under none: %q after %v; want the policy named within 2s", m, p.Detail, time.Since(start))
		}
		_, err = c.InstallPackagesStream(ctx, sess.ID, client.PackageRequest{Manager: m, Packages: []string{"requests"}}, nil)
		wantProblem(t, m+" install under none, streamed", err, 403, "forbidden")
	}
	_, err = c.Exec(ctx, sess.ID, client.ExecRequest{Code: "import requests", Packages: []string{"requests"}})
	if p := wantProblem(t, "execute with packages under none", err, 403, "forbidden"); !strings.Contains(p.Detail, `"none"`) {
		t.Errorf("execute with packages: %q; want the policy named", p.Detail)
	}
	_, err = c.ExecStream(ctx, sess.ID, client.ExecRequest{Code: "import requests", Packages: []string{"requests"}}, nil)
	wantProblem(t, "streamed execute with packages under none", err, 403, "forbidden")
	// On the WebSocket the refusal is an error event, and the socket takes
	// the next cell.
	mine, err := e.admin.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+"/v1/sessions/"+mine.ID+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	msg, _ := json.Marshal(client.WSMessage{Type: "execute", Execute: &client.ExecRequest{Code: "import requests", Packages: []string{"requests"}}})
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	_, b, err := conn.Read(ctx)
	var ev client.Event
	if err != nil || json.Unmarshal(b, &ev) != nil || ev.Type != client.EventError || ev.Error == nil || !strings.Contains(ev.Error.Detail, `"none"`) {
		t.Errorf("WebSocket execute with packages under none: %s, %v; want an error event naming the policy", b, err)
	}
	msg, _ = json.Marshal(client.WSMessage{Type: "execute", Execute: &client.ExecRequest{Code: "print(1+1)"}})
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	for out := ""; ; {
		_, b, err := conn.Read(ctx)
		var ev client.Event
		if err != nil || json.Unmarshal(b, &ev) != nil || ev.Type == client.EventError {
			t.Fatalf("the next cell on the socket: %s, %v", b, err)
		}
		if out += ev.Data; ev.Type == client.EventDone {
			if out != "2\n" {
				t.Errorf("the next cell printed %q, want 2", out)
			}
			break
		}
	}
	_, err = c.Exec(ctx, sess.ID, client.ExecRequest{Language: "bash", Code: "true", Packages: []string{"jq"}})
	wantProblem(t, "execute bash with packages", err, 400, "invalid")
	if h, err := c.History(ctx, sess.ID, 0, ""); err != nil || len(h.Executions) != 0 {
		t.Errorf("history after refused cells: %+v, %v; want none ran", h, err)
	}
	_, err = c.Run(ctx, client.RunRequest{Language: "python", Code: "import requests", Packages: []string{"requests"}})
	if p := wantProblem(t, "run with packages", err, 403, "forbidden"); !strings.Contains(p.Detail, `"none"`) {
		t.Errorf("run with packages: %q; want the run's policy named", p.Detail)
	}
	_, err = c.Run(ctx, client.RunRequest{Language: "python", Code: "1", Packages: []string{"-r/etc/passwd"}})
	wantProblem(t, "run with an option as a package", err, 400, "invalid")
}

// TestLanguagesListDefaultPackages: GET /v1/languages lists, for Python,
// JavaScript and TypeScript, the packages there by default, as the
// service reads them from this host.
func TestLanguagesListDefaultPackages(t *testing.T) {
	py, node, err := service.DefaultPackages(t.Context())
	if err != nil {
		t.Skipf("this host's python3 or node cannot list packages: %v", err)
	}
	e := newEnv(t, options{})
	langs, err := e.admin.Languages(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range langs {
		var want []service.PackageVersion
		switch l.Name {
		case "python":
			want = py
		case "javascript", "typescript":
			want = node
		}
		got := make([]service.PackageVersion, 0, len(l.Packages))
		for _, p := range l.Packages {
			got = append(got, service.PackageVersion(p))
		}
		if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
			t.Errorf("%s: packages %v; want %v", l.Name, got, want)
		}
	}
}

// testWheel is a valid pure-Python wheel of module with VALUE = value,
// written with archive/zip.
func testWheel(t *testing.T, project, version, module, value string) (string, []byte) {
	t.Helper()
	dist := strings.ReplaceAll(project, "-", "_") + "-" + version
	files := [][2]string{
		{module + "/__init__.py", fmt.Sprintf("VALUE = %q\n", value)},
		{dist + ".dist-info/METADATA", "Metadata-Version: 2.1\nName: " + project + "\nVersion: " + version + "\n"},
		{dist + ".dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: kiln-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, _ := zw.Create(f[0])
		w.Write([]byte(f[1]))
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(dist + ".dist-info/RECORD,,\n")
	w, _ := zw.Create(dist + ".dist-info/RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return dist + "-py3-none-any.whl", buf.Bytes()
}

// TestPackagesStreamThroughProxy (root): the API streams pip's progress
// and ends with the packages; an execute with packages installs and runs
// in one call. The index is a PEP 503 index the test serves on loopback,
// the egress proxy's configured upstream.
func TestPackagesStreamThroughProxy(t *testing.T) {
	wheels := map[string][2]any{}
	for _, w := range [][3]string{{"kiln-one", "kilnone", "one"}, {"kiln-two", "kilntwo", "two"}} {
		name, data := testWheel(t, w[0], "1.0", w[1], w[2])
		wheels[w[0]] = [2]any{name, data}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/{project}/", func(w http.ResponseWriter, r *http.Request) {
		whl, ok := wheels[r.PathValue("project")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		sum := sha256.Sum256(whl[1].([]byte))
		fmt.Fprintf(w, "<html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>", whl[0], hex.EncodeToString(sum[:]), whl[0])
	})
	mux.HandleFunc("GET /files/{file}", func(w http.ResponseWriter, r *http.Request) {
		for _, whl := range wheels {
			if whl[0].(string) == r.PathValue("file") {
				w.Write(whl[1].([]byte))
				return
			}
		}
		http.NotFound(w, r)
	})
	index := httptest.NewServer(mux)
	t.Cleanup(index.Close)
	e := newEnv(t, options{sandboxed: true, svc: service.Config{
		NetworkCeiling: kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com"}},
		Egress:         egress.Config{PyPIIndex: index.URL + "/simple/"}}})
	ctx := ctxT(t)
	c := e.user("alice")
	sess, err := c.CreateSession(ctx, client.SessionRequest{Network: &client.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var out strings.Builder
	res, err := c.InstallPackagesStream(ctx, sess.ID, client.PackageRequest{Manager: "pip", Packages: []string{"kiln-one==1.0"}}, func(ev client.Event) {
		if len(types) == 0 || types[len(types)-1] != ev.Type {
			types = append(types, ev.Type)
		}
		out.WriteString(ev.Data)
	})
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if len(res.Packages) != 1 || res.Packages[0] != (client.InstalledPackage{Name: "kiln-one", Version: "1.0", Requested: true}) {
		t.Errorf("installed %+v; want kiln-one 1.0", res.Packages)
	}
	if types[0] != client.EventStarted || types[len(types)-1] != client.EventDone || !strings.Contains(out.String(), "kiln-one") {
		t.Errorf("events %v with output %q; want started, pip's output naming the package, done", types, out.String())
	}
	x, err := c.Exec(ctx, sess.ID, client.ExecRequest{Code: "import kilnone, kilntwo\nprint(kilnone.VALUE, kilntwo.VALUE)", Packages: []string{"kiln-two"}})
	if err != nil || x.Result.Stdout != "one two\n" {
		t.Fatalf("execute with packages: %+v, %v", x, err)
	}
}
