package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/server"
	"github.com/kiln-dev/kiln/internal/service"
)

// TestMaxCodeEverywhere: --max-code is one limit, for session cells and
// one-shot runs alike.
func TestMaxCodeEverywhere(t *testing.T) {
	e := newEnv(t, options{svc: service.Config{MaxCodeBytes: 100}})
	ctx := ctxT(t)
	code := "print(1)\n" + strings.Repeat("#", 200)
	_, err := e.admin.Run(ctx, client.RunRequest{Language: "python", Code: code})
	if p := wantProblem(t, "a run over --max-code", err, 413, "too_large"); !strings.Contains(p.Detail, "100 bytes") {
		t.Errorf("run: detail %q does not name the limit", p.Detail)
	}
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.admin.Exec(ctx, s.ID, client.ExecRequest{Code: code})
	if p := wantProblem(t, "a cell over --max-code", err, 413, "too_large"); !strings.Contains(p.Detail, "100 bytes") {
		t.Errorf("cell: detail %q does not name the limit", p.Detail)
	}
	if r, err := e.admin.Run(ctx, client.RunRequest{Language: "python", Code: "print(1)"}); err != nil || r.Result.Stdout != "1\n" {
		t.Errorf("a run under the limit: %+v, %v", r, err)
	}
}

// trickle sends a request whose body of n bytes comes one byte every
// gap, and returns the answer and how long it took.
func trickle(t *testing.T, url, method, path, key, ctype string, n int, gap time.Duration) (*http.Response, client.Problem, time.Duration) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", method, path, u.Host, key, ctype, n)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < n; i++ {
			select {
			case <-stop:
				return
			case <-time.After(gap):
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // the test's own bound
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: no answer to a trickled body: %v", method, path, err)
	}
	defer resp.Body.Close()
	var p client.Problem
	json.NewDecoder(resp.Body).Decode(&p)
	return resp, p, time.Since(start)
}

// TestSlowBodyIsCutOff: a body trickled below the minimum rate is cut off
// with 408, for JSON bodies and uploads alike, instead of holding the
// connection for ever.
func TestSlowBodyIsCutOff(t *testing.T) {
	e := newEnv(t, options{http: server.Config{BodyGrace: time.Second, BodyMinRate: 100}})
	ctx := ctxT(t)
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path, ctype string }{
		{"POST", "/v1/sessions", "application/json"},
		{"PUT", "/v1/sessions/" + s.ID + "/files/slow.txt", "text/plain"},
		{"POST", "/v1/sessions/" + s.ID + "/files/?extract=tar", "application/x-tar"},
	} {
		// 1,000 bytes, a byte every 50 ms: 50 s in all, at 20 bytes a second.
		resp, p, took := trickle(t, e.url, tc.method, tc.path, e.key, tc.ctype, 1000, 50*time.Millisecond)
		if resp.StatusCode != http.StatusRequestTimeout || p.Code != "request_timeout" || !strings.Contains(p.Detail, "too slowly") {
			t.Errorf("%s %s trickled: %d %+v, want 408 request_timeout", tc.method, tc.path, resp.StatusCode, p)
		}
		if took > 30*time.Second {
			t.Errorf("%s %s: cut off after %v, want within seconds of the 1 s grace", tc.method, tc.path, took)
		}
	}
	// A body at a good rate goes through.
	if _, err := e.admin.Upload(ctx, s.ID, "fast.txt", strings.NewReader(strings.Repeat("x", 100000)), true); err != nil {
		t.Errorf("a fast upload: %v", err)
	}
}

// TestArchiveSpoolBounded: archive uploads being received are bounded per
// user (429) and in total (503), each with Retry-After; when an upload
// ends, its share is free again.
func TestArchiveSpoolBounded(t *testing.T) {
	e := newEnv(t, options{http: server.Config{MaxSpoolBytesPerUser: 10 << 10, MaxSpoolBytes: 12 << 10}})
	ctx := ctxT(t)
	alice, bob := e.user("alice"), e.user("bob")
	keyOf := map[*client.Client]string{}
	for c, name := range map[*client.Client]string{alice: "alice", bob: "bob"} {
		k, err := c.CreateKey(ctx, "me", name+"-raw")
		if err != nil {
			t.Fatal(err)
		}
		keyOf[c] = k.Secret
	}
	sa, err := alice.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := bob.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	upload := func(c *client.Client, s string, n int) (*http.Response, client.Problem) {
		return raw(t, "POST", e.url+"/v1/sessions/"+s+"/files/?extract=tar", keyOf[c], "application/x-tar", strings.Repeat("x", n))
	}

	// Alice holds 9 KiB of an upload that has not ended.
	pr, pw := io.Pipe()
	held := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", e.url+"/v1/sessions/"+sa.ID+"/files/?extract=tar", pr)
		req.Header.Set("Authorization", "Bearer "+keyOf[alice])
		req.Header.Set("Content-Type", "application/x-tar")
		// A connection of its own: a pooled one that the server has
		// closed would fail a request whose body cannot be sent again.
		hc := &http.Client{Transport: &http.Transport{}}
		resp, err := hc.Do(req)
		if err != nil {
			held <- err.Error()
			return
		}
		defer resp.Body.Close()
		var p client.Problem
		json.NewDecoder(resp.Body).Decode(&p)
		held <- fmt.Sprintf("%s %s", resp.Status, p.Detail)
	}()
	if _, err := pw.Write([]byte(strings.Repeat("x", 9<<10))); err != nil {
		t.Fatal(err)
	}
	// Wait until the server has counted all of alice's bytes. Not by
	// probing with bob's uploads: each probe's bytes share the budget
	// while it is read, so alice's last bytes arriving during a probe
	// would be refused (503, rightly) and end her upload (seen in CI).
	deadline := time.Now().Add(30 * time.Second)
	for e.srv.SpoolBytes() < 9<<10 {
		select {
		case got := <-held:
			t.Fatalf("alice's held upload ended early: %s", got)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server counted %d bytes of alice's upload after 30 s, want %d", e.srv.SpoolBytes(), 9<<10)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Bob's 4 KiB would make 13 KiB: over the total.
	resp, p := upload(bob, sb.ID, 4<<10)
	if resp.StatusCode != 503 || p.Code != "unavailable" || resp.Header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "archive uploads") {
		t.Errorf("bob's upload while alice's holds the spool: %d %+v, Retry-After %q; want 503 unavailable", resp.StatusCode, p, resp.Header.Get("Retry-After"))
	}
	// Alice's second upload of 2 KiB is over her own share (11 KiB).
	resp, p = upload(alice, sa.ID, 2<<10)
	if resp.StatusCode != 429 || p.Code != "quota_exceeded" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("alice over her share: %d %+v, Retry-After %q; want 429 quota_exceeded", resp.StatusCode, p, resp.Header.Get("Retry-After"))
	}
	// Bob's 2 KiB fits (11 KiB in all); it is not a tar, so unpacking it fails.
	if resp, p := upload(bob, sb.ID, 2<<10); resp.StatusCode != 400 {
		t.Errorf("bob's small upload: %d %+v, want it read (and refused as no tar: 400)", resp.StatusCode, p)
	}
	// When alice's upload ends, its share is free again.
	pw.Close()
	if got := <-held; !strings.HasPrefix(got, "400") {
		t.Errorf("alice's held upload: %s, want 400 (not a tar)", got)
	}
	if resp, p := upload(alice, sa.ID, 9<<10); resp.StatusCode != 400 {
		t.Errorf("alice's upload after hers ended: %d %+v, want it read (400: not a tar)", resp.StatusCode, p)
	}
}
