package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

var testCeiling = kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com", "*.example.org"}}

// TestSetNetworkCeiling: a session's policy, at creation and through
// SetNetwork, stays within the server's ceiling for its owner, with an
// error naming the ceiling; an admin may exceed it; another user's
// session is not found.
func TestSetNetworkCeiling(t *testing.T) {
	ts := newTestService(t, Config{NetworkCeiling: testCeiling})
	ctx := ctxT(t, time.Minute)
	u, admin, other := ts.user(t, "u", false), ts.user(t, "root", true), ts.user(t, "o", false)
	beyond := kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"api.example.net"}}

	_, err := ts.CreateSession(ctx, u, SessionSpec{Network: beyond})
	if kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(err.Error(), "ceiling") || !strings.Contains(err.Error(), "example.com") {
		t.Errorf("create beyond the ceiling: %v; want forbidden naming the ceiling", err)
	}
	sess, err := ts.CreateSession(ctx, u, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Network.Mode != kiln.NetworkNone {
		t.Errorf("default policy %+v; want none", sess.Network)
	}
	within := kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com", "pkgs.example.org"}}
	got, err := ts.SetNetwork(ctx, u, sess.ID, within)
	if err != nil || got.Network.Mode != kiln.NetworkAllowlist || !slices.Equal(got.Network.Allow, within.Allow) {
		t.Fatalf("set within the ceiling: %+v, %v", got.Network, err)
	}
	if again, _ := ts.Session(ctx, u, sess.ID); !slices.Equal(again.Network.Allow, within.Allow) {
		t.Errorf("the session reads back %+v; want %+v", again.Network, within)
	}
	if list, _, err := ts.ListSessions(ctx, u, store.SessionFilter{}, store.Page{Limit: 10}); err != nil || len(list) != 1 || !slices.Equal(list[0].Network.Allow, within.Allow) {
		t.Errorf("the session's list: %+v, %v; want its policy %+v", list, err, within)
	}
	_, err = ts.SetNetwork(ctx, u, sess.ID, beyond)
	if kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(err.Error(), "api.example.net") || !strings.Contains(err.Error(), "ceiling") {
		t.Errorf("set beyond the ceiling: %v; want forbidden naming the host and the ceiling", err)
	}
	if again, _ := ts.Session(ctx, u, sess.ID); !slices.Equal(again.Network.Allow, within.Allow) {
		t.Errorf("a refused change changed the policy to %+v", again.Network)
	}
	_, err = ts.SetNetwork(ctx, u, sess.ID, kiln.NetworkPolicy{Mode: "open"})
	if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), "allowlist") {
		t.Errorf("an unknown mode: %v; want invalid naming the modes", err)
	}
	if _, err := ts.SetNetwork(ctx, other, sess.ID, within); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another user's session: %v; want not found", err)
	}
	mine, err := ts.CreateSession(ctx, admin, SessionSpec{Network: beyond})
	if err != nil || !slices.Equal(mine.Network.Allow, beyond.Allow) {
		t.Fatalf("an admin's session beyond the ceiling: %+v, %v", mine.Network, err)
	}
	if _, err := ts.SetNetwork(ctx, admin, mine.ID, kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"*.example.net"}}); err != nil {
		t.Errorf("an admin beyond the ceiling: %v", err)
	}
	if _, err := ts.SetNetwork(ctx, u, sess.ID, kiln.NetworkPolicy{}); err != nil {
		t.Errorf("back to none: %v", err)
	}
}

// TestNoNetworkCeilingByDefault: with no ceiling only "none" is possible
// for a non-admin.
func TestNoNetworkCeilingByDefault(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, time.Minute)
	u := ts.user(t, "u", false)
	_, err := ts.CreateSession(ctx, u, SessionSpec{Network: kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com"}}})
	if kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(err.Error(), `"none"`) {
		t.Errorf("an allowlist under no ceiling: %v; want forbidden naming the ceiling none", err)
	}
}

// cellOut runs code in a session and returns its result.
func cellOut(t *testing.T, ts *testService, u kiln.User, id, lang, code string) kiln.CellResult {
	t.Helper()
	e, err := ts.Exec(ctxT(t, time.Minute), u, id, kiln.CellRequest{Language: lang, Code: code}, ExecEvents{})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	return *e.Result
}

// egressAudit is the session's egress rows of the audit log.
func egressAudit(t *testing.T, ts *testService, id string) []kiln.EgressRecord {
	t.Helper()
	entries, _, err := ts.store.ListAudit(context.Background(), store.AuditFilter{SessionID: id}, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []kiln.EgressRecord
	for _, e := range entries {
		if e.Action == "egress" {
			var r kiln.EgressRecord
			if err := json.Unmarshal(e.Detail, &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
	}
	return out
}

// TestSessionNetworkNone: in a session with the default policy, HTTP and
// HTTPS fail at once with a message naming the policy, DNS and raw TCP
// fail at once, every attempt is in the cell's result and the audit log,
// and the session runs its next cell.
func TestSessionNetworkNone(t *testing.T) {
	ts := newNativeService(t, Config{})
	u := ts.user(t, "u", false)
	sess, err := ts.CreateSession(ctxT(t, time.Minute), u, SessionSpec{Languages: []string{"python", "bash"}})
	if err != nil {
		t.Fatal(err)
	}
	res := cellOut(t, ts, u, sess.ID, "python", `
import socket, time, urllib.request, urllib.error
def timed(name, f):
    t = time.monotonic()
    try:
        f()
        print(name, "succeeded")
    except urllib.error.HTTPError as e:
        print(name, "failed:", e.code, e.read().decode().strip(), "after %.2f s" % (time.monotonic() - t))
    except Exception as e:
        print(name, "failed:", type(e).__name__, e, "after %.2f s" % (time.monotonic() - t))
timed("http", lambda: urllib.request.urlopen("http://example.com/", timeout=10))
timed("https", lambda: urllib.request.urlopen("https://example.com/", timeout=10))
timed("dns", lambda: socket.getaddrinfo("example.com", 80))
timed("tcp", lambda: socket.create_connection(("93.184.215.14", 80), timeout=10))
`)
	for _, want := range []string{
		`http failed: 403 kiln: this session's network policy is "none"`,
		`https failed: URLError <urlopen error Tunnel connection failed: 403 kiln: this session's network policy is "none"`,
		"dns failed: gaierror",
		"tcp failed: OSError [Errno 101] Network is unreachable",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("python said:\n%s%s\nwant a line with %q", res.Stdout, res.Stderr, want)
		}
	}
	slowCheck(t, res.Stdout, 2)
	curl := cellOut(t, ts, u, sess.ID, "bash", `curl -sS -w ' %{http_code} %{time_total}\n' http://example.com/; curl -sS https://example.com/ 2>&1 | head -c 300`)
	if !strings.Contains(curl.Stdout, `network policy is "none"`) || !strings.Contains(curl.Stdout, " 403 ") {
		t.Errorf("curl said %q; want the proxy's 403 naming the policy", curl.Stdout)
	}

	recs := res.Egress
	if len(recs) != 2 {
		t.Fatalf("the python cell's egress: %+v; want 2 records (http, https)", recs)
	}
	for _, r := range recs {
		if r.Allowed || r.Host != "example.com" || !strings.Contains(r.Reason, "none") {
			t.Errorf("record %+v; want example.com denied for the policy none", r)
		}
	}
	if len(curl.Egress) != 2 {
		t.Errorf("the curl cell's egress: %+v; want its own 2 records", curl.Egress)
	}
	if got := egressAudit(t, ts, sess.ID); len(got) != 4 {
		t.Errorf("audit log: %d egress rows, want 4: %+v", len(got), got)
	}
	if next := cellOut(t, ts, u, sess.ID, "python", "print(6*7)"); next.Stdout != "42\n" || len(next.Egress) != 0 {
		t.Errorf("the next cell: %q, egress %+v; want 42 and none", next.Stdout, next.Egress)
	}
}

// slowCheck fails for a line "... after N s" with N over max seconds.
func slowCheck(t *testing.T, out string, max float64) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if i := strings.LastIndex(line, " after "); i > 0 {
			var secs float64
			if _, err := fmt.Sscan(line[i+len(" after "):], &secs); err == nil && secs > max {
				t.Errorf("too slow (over %v s): %s", max, line)
			}
		}
	}
}

// publicAddr stands for a host on the internet: the fake resolver gives
// it and the proxy's dialer takes it to a local server.
const publicAddr = "93.184.215.14"

// upstream is an HTTP server on loopback that the proxy reaches through
// its Dial for publicAddr, and an egress config for that.
func upstream(t *testing.T, names ...string) egress.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello from " + r.Host + "\n"))
	}))
	t.Cleanup(srv.Close)
	return egress.Config{
		Resolver: fakeResolver(names),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, _ := net.SplitHostPort(addr); host != publicAddr {
				return nil, errors.New("the test's dialer knows only " + publicAddr)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
		},
	}
}

// fakeResolver resolves the names given to publicAddr and no other.
type fakeResolver []string

func (f fakeResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	if slices.Contains(f, strings.TrimSuffix(host, ".")) {
		return []net.IPAddr{{IP: net.ParseIP(publicAddr)}}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestSessionAllowlist: an allowed host is reached and recorded with its
// bytes; a host not on the list is refused with the reason, recorded in
// the result and the audit log, and the session stays healthy.
func TestSessionAllowlist(t *testing.T) {
	cfg := Config{NetworkCeiling: testCeiling, Egress: upstream(t, "example.com", "other.example.net")}
	ts := newNativeService(t, cfg)
	u := ts.user(t, "u", false)
	sess, err := ts.CreateSession(ctxT(t, time.Minute), u, SessionSpec{Languages: []string{"bash"},
		Network: kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	res := cellOut(t, ts, u, sess.ID, "bash", `curl -sS http://example.com/hi; curl -sS -w '%{http_code}\n' http://other.example.net/`)
	if !strings.Contains(res.Stdout, "hello from example.com") {
		t.Errorf("the allowed host: %q %q; want its answer", res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stdout, "403") || !strings.Contains(res.Stdout, "other.example.net") {
		t.Errorf("a host not on the list: %q; want a 403 naming it", res.Stdout)
	}
	var allowed, denied *kiln.EgressRecord
	for i, r := range res.Egress {
		switch r.Host {
		case "example.com":
			allowed = &res.Egress[i]
		case "other.example.net":
			denied = &res.Egress[i]
		}
	}
	if allowed == nil || !allowed.Allowed || allowed.Port != 80 || allowed.BytesDown == 0 {
		t.Errorf("the allowed request's record: %+v (all: %+v)", allowed, res.Egress)
	}
	if denied == nil || denied.Allowed || !strings.Contains(denied.Reason, "allowlist") {
		t.Errorf("the refused request's record: %+v; want denied, reason naming the allowlist", denied)
	}
	if got := egressAudit(t, ts, sess.ID); len(got) != 2 {
		t.Errorf("audit log: %+v; want both attempts", got)
	}
	// Narrowed to none while the session lives: the next request is refused.
	if _, err := ts.SetNetwork(ctxT(t, time.Minute), u, sess.ID, kiln.NetworkPolicy{}); err != nil {
		t.Fatal(err)
	}
	next := cellOut(t, ts, u, sess.ID, "bash", `curl -sS http://example.com/hi; echo ok`)
	if !strings.Contains(next.Stdout, `network policy is "none"`) || !strings.HasSuffix(next.Stdout, "ok\n") {
		t.Errorf("after PUT network none: %q; want the refusal and the cell to go on", next.Stdout)
	}
}

// TestNetworkCleanup: a session's proxy socket and goroutines are gone
// with its sandbox, pooled ones' with the service.
func TestNetworkCleanup(t *testing.T) {
	ts := newNativeService(t, Config{})
	u := ts.user(t, "u", false)
	dir := filepath.Join(ts.cfg.DataDir, netSocketDir)
	ctx := ctxT(t, time.Minute)
	base := runtime.NumGoroutine()
	sess, err := ts.CreateSession(ctx, u, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	cellOut(t, ts, u, sess.ID, "python", "import urllib.request\ntry: urllib.request.urlopen('http://example.com/')\nexcept Exception as e: print(e)")
	if names := sockets(t, dir); len(names) != 1 || ts.nets.count() != 1 {
		t.Fatalf("a live session: sockets %q, %d proxy sessions; want one", names, ts.nets.count())
	}
	if err := ts.DeleteSession(ctx, u, sess.ID); err != nil {
		t.Fatal(err)
	}
	if names := sockets(t, dir); len(names) != 0 || ts.nets.count() != 0 {
		t.Errorf("after delete: sockets %q, %d proxy sessions; want none", names, ts.nets.count())
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after delete, %d before create:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestPooledNetwork: a pooled sandbox has a proxy session with the
// policy none; the session that takes it gets its own policy; Close
// leaves no socket.
func TestPooledNetwork(t *testing.T) {
	cfg := Config{PoolSize: 1, NetworkCeiling: testCeiling, Egress: upstream(t, "example.com")}
	ts := newNativeService(t, cfg)
	u := ts.user(t, "u", false)
	dir := filepath.Join(ts.cfg.DataDir, netSocketDir)
	waitFor(t, func() bool { return len(ts.pool.ready) == 1 })
	if names := sockets(t, dir); len(names) != 1 {
		t.Fatalf("a ready pooled sandbox: sockets %q; want one", names)
	}
	sess, err := ts.CreateSession(ctxT(t, time.Minute), u, SessionSpec{Network: kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	res := cellOut(t, ts, u, sess.ID, "python", "import urllib.request\nprint(urllib.request.urlopen('http://example.com/x').read().decode())")
	if !strings.Contains(res.Stdout, "hello from example.com") || len(res.Egress) != 1 || !res.Egress[0].Allowed {
		t.Errorf("a pooled session with an allowlist: %q %q, egress %+v", res.Stdout, res.Stderr, res.Egress)
	}
	// The pool makes the next one; the session's and that one's sockets.
	waitFor(t, func() bool { return len(ts.pool.ready) == 1 })
	if names := sockets(t, dir); len(names) != 2 {
		t.Errorf("a session and a ready pooled sandbox: sockets %q; want two", names)
	}
	if err := ts.DeleteSession(ctxT(t, time.Minute), u, sess.ID); err != nil {
		t.Fatal(err)
	}
	pd, release := ts.pool.takeDeferred()
	ts.discardPooled(pd)
	release()
	if names := sockets(t, dir); len(names) != 0 {
		t.Errorf("after the session and the pooled sandbox went: sockets %q; want none", names)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sockets(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestRunNetworkNone: a one-shot run, from the run pool or a fresh
// sandbox, goes through a proxy session with the policy none: refused
// with the policy named, recorded in its result and the audit log, and
// its socket gone with its sandbox.
func TestRunNetworkNone(t *testing.T) {
	for _, size := range []int{0, 1} {
		ts := newNativeService(t, Config{RunPoolSize: size})
		u := ts.user(t, "u", false)
		ctx := ctxT(t, 2*time.Minute)
		if size > 0 {
			if err := ready(ctx, ts.runs.pools["python"]); err != nil {
				t.Fatal(err)
			}
		}
		before := ts.runs.taken.Load()
		out, err := ts.Run(ctx, u, RunRequest{Language: "python", Code: "import urllib.request\ntry: urllib.request.urlopen('http://example.com/')\nexcept Exception as e: print(e.code, e.read().decode())"})
		if err != nil {
			t.Fatal(err)
		}
		if pooled := ts.runs.taken.Load() > before; pooled != (size > 0) {
			t.Errorf("run pool %d: pooled %v", size, pooled)
		}
		res := out.Result
		if !strings.Contains(res.Stdout, `403 kiln: this session's network policy is "none"`) {
			t.Errorf("run pool %d: %q %q; want the proxy's refusal", size, res.Stdout, res.Stderr)
		}
		if len(res.Egress) != 1 || res.Egress[0].Allowed || res.Egress[0].Host != "example.com" {
			t.Errorf("run pool %d: egress %+v; want one refused attempt", size, res.Egress)
		}
		entries, _, err := ts.store.ListAudit(ctx, store.AuditFilter{UserID: u.ID}, store.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(entries, func(e store.AuditEntry) bool { return e.Action == "egress" && e.Outcome == "denied" }) {
			t.Errorf("run pool %d: no egress row in the audit log: %+v", size, entries)
		}
		ts.runs.teardowns.Wait()
		if want := size * len(ts.runs.pools); len(sockets(t, filepath.Join(ts.cfg.DataDir, netSocketDir))) > want {
			t.Errorf("run pool %d: sockets %q after the run; want at most the pool's", size, sockets(t, filepath.Join(ts.cfg.DataDir, netSocketDir)))
		}
	}
}

// TestSettling: a cell's end waits only for connections that moved
// bytes lately, not for one a kernel keeps open and idle.
func TestSettling(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		conns int64
		last  time.Time
		want  bool
	}{
		{0, now, false},                       // nothing open
		{1, now.Add(-time.Millisecond), true}, // a request just answered
		{2, now.Add(-time.Minute), false},     // idle keep-alive connections
	} {
		if got := settling(tc.conns, tc.last, now); got != tc.want {
			t.Errorf("settling(%d open, busy %v ago) = %v, want %v", tc.conns, now.Sub(tc.last), got, tc.want)
		}
	}
}
