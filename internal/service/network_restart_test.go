package service

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/unboxed"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// TestNetworkSurvivesRestart: a session's allowlist, set at creation or
// changed later, is the policy it has after a restart of the service on
// the same store: it reads back, and its new sandbox's proxy session lets
// the allowed host through and refuses another one.
func TestNetworkSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "kiln.db")
	egressCfg := upstream(t, "example.com", "api.example.org")
	open := func() (*Service, func()) {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		st, err := sqlite.Open(context.Background(), dbPath)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(context.Background(), Config{DataDir: dir, Workspaces: workspace.Plain, PoolSize: -1,
			NetworkCeiling: testCeiling, Egress: egressCfg}, st, engine.New(unboxed.New(t.TempDir()), log), log)
		if err != nil {
			t.Fatal(err)
		}
		return svc, func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			svc.Close(ctx)
			st.Close()
		}
	}
	svc, closeSvc := open()
	ctx := ctxT(t, 2*time.Minute)
	u := kiln.User{Name: "u"}
	if err := svc.store.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	atCreate := kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com"}}
	a, err := svc.CreateSession(ctx, u, SessionSpec{Languages: []string{"bash"}, Network: atCreate})
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.CreateSession(ctx, u, SessionSpec{Languages: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	changed := kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"*.example.org"}}
	if _, err := svc.SetNetwork(ctx, u, b.ID, changed); err != nil {
		t.Fatal(err)
	}
	closeSvc()

	svc, closeSvc = open()
	defer closeSvc()
	for _, c := range []struct {
		id             string
		want           kiln.NetworkPolicy
		allowed, other string
	}{{a.ID, atCreate, "example.com", "api.example.org"}, {b.ID, changed, "api.example.org", "example.com"}} {
		got, err := svc.Session(ctx, u, c.id)
		if err != nil || got.Network.Mode != kiln.NetworkAllowlist || !slices.Equal(got.Network.Allow, c.want.Allow) {
			t.Errorf("after a restart, session %s reads back %+v, %v; want %+v", c.id, got.Network, err, c.want)
		}
		// The resumed session's next sandbox opens its proxy session
		// with the stored policy.
		if res := cellOut(t, &testService{Service: svc}, u, c.id, "bash", "echo hi"); res.Stdout != "hi\n" {
			t.Fatalf("a cell after the restart: %+v", res)
		}
		l := svc.lookup(c.id)
		n := l.netNow()
		if n == nil {
			t.Fatalf("session %s has no proxy session after its first cell", c.id)
		}
		if code, body := proxyGet(t, n.path, c.allowed); code != http.StatusOK || !strings.Contains(body, "hello from "+c.allowed) {
			t.Errorf("after a restart, %s (on the allowlist): %d %q; want it reached", c.allowed, code, body)
		}
		if code, body := proxyGet(t, n.path, c.other); code != http.StatusForbidden || !strings.Contains(body, c.other) {
			t.Errorf("after a restart, %s (not on the list): %d %q; want 403 naming it", c.other, code, body)
		}
	}
	list, _, err := svc.ListSessions(ctx, u, store.SessionFilter{}, store.Page{Limit: 10})
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for _, s := range list {
		if s.Network.Mode != kiln.NetworkAllowlist {
			t.Errorf("after a restart the list shows session %s with %+v; want its allowlist", s.ID, s.Network)
		}
	}
}

// proxyGet asks the egress proxy on the unix socket at path for
// http://host/ as a sandbox's HTTP client would (absolute-URI form).
func proxyGet(t *testing.T, path, host string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("unix", path, 10*time.Second)
	if err != nil {
		t.Fatalf("dial the egress socket: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	req, _ := http.NewRequest("GET", "http://"+host+"/", nil)
	if err := req.WriteProxy(c); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatalf("the proxy's answer for %s: %v", host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body)
}
