package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNet is a test's outside world: a resolver that answers from a table
// and a dialer that routes the public addresses it knows to local servers
// and refuses everything else, so no test reaches the internet.
type fakeNet struct {
	res    *fakeResolver
	mu     sync.Mutex
	routes map[string]string // "203.0.113.10:80" -> "127.0.0.1:port"
	dialed []string
}

func newFakeNet() *fakeNet {
	return &fakeNet{res: &fakeResolver{answers: map[string][]string{}}, routes: map[string]string{}}
}

func (f *fakeNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	f.dialed = append(f.dialed, addr)
	to, ok := f.routes[addr]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("test network: no route to %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (f *fakeNet) dials() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.dialed...)
}

// route makes name resolve to ip, and ip:port reach the local server at
// target.
func (f *fakeNet) route(name, ip string, port int, target string) {
	f.res.mu.Lock()
	f.res.answers[name] = []string{ip}
	f.res.mu.Unlock()
	f.mu.Lock()
	f.routes[net.JoinHostPort(ip, fmt.Sprint(port))] = target
	f.mu.Unlock()
}

func (f *fakeNet) answer(name string, ips ...string) {
	f.res.mu.Lock()
	f.res.answers[name] = ips
	f.res.mu.Unlock()
}

func hostOf(u string) string {
	pu, _ := url.Parse(u)
	return pu.Host
}

// forwardSetup is a proxy on a fake network with one allowed origin,
// "allowed.example" at 203.0.113.10, served by h.
func forwardSetup(t *testing.T, cfg Config, pol Policy, h http.Handler) (*fakeNet, *Session, *recorder, *http.Client) {
	t.Helper()
	origin := httptest.NewServer(h)
	t.Cleanup(origin.Close)
	fn := newFakeNet()
	fn.route("allowed.example", "203.0.113.10", 80, hostOf(origin.URL))
	cfg.Resolver, cfg.Dial = fn.res, fn.dial
	p := mustNew(t, cfg)
	p.hostAddrs = func() []net.IP { return []net.IP{net.ParseIP("198.51.100.7")} }
	rec := &recorder{}
	s := p.Open("s", pol, rec.add)
	client, _ := serveSession(t, s)
	return fn, s, rec, client
}

var allowExample = Policy{Mode: ModeAllowlist, Allow: []string{"allowed.example", "*.allowed.example", "example.com", "rebind.example", "inside.example", "ten.example", "meta.example", "mapped.example", "cgnat.example", "own.example", "v6.example", "mixed.example"}}

func get(t *testing.T, c *http.Client, u string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestForwardAllowed(t *testing.T) {
	var gotHdr http.Header
	fn, _, rec, client := forwardSetup(t, Config{}, allowExample, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHdr = r.Header.Clone()
		w.Header().Set("Keep-Alive", "timeout=5")
		io.WriteString(w, "hello from "+r.Host+r.URL.RequestURI())
	}))
	code, body, hdr := get(t, client, "http://allowed.example/a?b=c",
		"Proxy-Authorization", "Basic c2VjcmV0", "X-Custom", "kept", "Connection", "X-Drop", "X-Drop", "gone")
	if code != 200 || body != "hello from allowed.example/a?b=c" {
		t.Fatalf("GET = %d %q, want 200 with the origin's body", code, body)
	}
	if gotHdr.Get("Proxy-Authorization") != "" || gotHdr.Get("X-Drop") != "" || gotHdr.Get("X-Custom") != "kept" {
		t.Errorf("origin got headers %v: want no Proxy-Authorization and no header named in Connection, X-Custom kept", gotHdr)
	}
	if hdr.Get("Keep-Alive") != "" {
		t.Errorf("client got the origin's hop-by-hop Keep-Alive header")
	}
	if d := fn.dials(); len(d) != 1 || d[0] != "203.0.113.10:80" {
		t.Errorf("dialled %v, want exactly [203.0.113.10:80]", d)
	}
	recs := waitRecords(t, rec, 1)
	r := recs[0]
	if !r.Allowed || r.Kind != KindHTTP || r.Host != "allowed.example" || r.Port != 80 || r.Addr != "203.0.113.10" || r.BytesDown != int64(len(body)) || r.Reason != "" {
		t.Errorf("record = %+v, want allowed http to allowed.example:80 at 203.0.113.10 with %d bytes down", r, len(body))
	}
}

func TestConnectAllowed(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secret hello")
	}))
	defer origin.Close()
	fn := newFakeNet()
	fn.route("example.com", "203.0.113.11", 443, hostOf(origin.URL))
	p := mustNew(t, Config{Resolver: fn.res, Dial: fn.dial})
	var rec recorder
	s := p.Open("s", allowExample, rec.add)
	client, _ := serveSession(t, s)
	tr := client.Transport.(*http.Transport)
	tr.TLSClientConfig = origin.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tr.TLSClientConfig.ServerName = "example.com"
	code, body, _ := get(t, client, "https://example.com/")
	if code != 200 || body != "secret hello" {
		t.Fatalf("GET https = %d %q, want 200 through the tunnel", code, body)
	}
	// The session's listener is closed by cleanup; the record comes when
	// the tunnel ends, which the transport's close of the connection does.
	tr.CloseIdleConnections()
	waitRecords(t, &rec, 1)
	r := rec.all()[0]
	if !r.Allowed || r.Kind != KindConnect || r.Port != 443 || r.Addr != "203.0.113.11" || r.BytesUp == 0 || r.BytesDown == 0 {
		t.Errorf("record = %+v, want an allowed connect to 203.0.113.11:443 with bytes both ways", r)
	}
}

func waitRecords(t *testing.T, rec *recorder, n int) []Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.all()) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(rec.all()); got != n {
		t.Fatalf("got %d records, want %d: %+v", got, n, rec.all())
	}
	time.Sleep(20 * time.Millisecond) // and no more come
	if got := len(rec.all()); got != n {
		t.Fatalf("got %d records, want %d: %+v", got, n, rec.all())
	}
	return rec.all()
}

// TestDenials: each class the issue names is refused with its reason, over
// plain HTTP and over CONNECT, recorded once, and never dialled.
func TestDenials(t *testing.T) {
	fn, _, rec, client := forwardSetup(t, Config{}, allowExample, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	fn.answer("inside.example", "127.0.0.1")
	fn.answer("ten.example", "10.1.2.3")
	fn.answer("meta.example", "169.254.169.254")
	fn.answer("mapped.example", "::ffff:127.0.0.1")
	fn.answer("cgnat.example", "100.64.0.1")
	fn.answer("own.example", "198.51.100.7")
	fn.answer("v6.example", "fd00::1")
	fn.answer("mixed.example", "203.0.113.10,10.0.0.1")
	fn.answer("other.example", "203.0.113.10")
	cases := []struct {
		host   string
		code   int
		reason string
	}{
		{"other.example", 403, "not on the allowlist"},
		{"allowed.example:8080", 403, "not on the allowlist"},
		{"203.0.113.10", 403, "not on the allowlist"},
		{"inside.example", 403, "resolves to a loopback address 127.0.0.1"},
		{"ten.example", 403, "resolves to a private address 10.1.2.3"},
		{"meta.example", 403, "resolves to a cloud metadata address 169.254.169.254"},
		{"mapped.example", 403, "resolves to a loopback address 127.0.0.1"},
		{"cgnat.example", 403, "resolves to a shared (CGNAT) address 100.64.0.1"},
		{"own.example", 403, "resolves to this host's own address 198.51.100.7"},
		{"v6.example", 403, "resolves to a private address fd00::1"},
		{"mixed.example", 403, "resolves to a private address 10.0.0.1"},
		{"nx.allowed.example", 502, "cannot resolve"},
	}
	for _, c := range cases {
		for _, scheme := range []string{"http", "https"} {
			before := len(rec.all())
			code, body, _ := get(t, client, scheme+"://"+c.host+"/")
			if scheme == "http" && (code != c.code || !strings.Contains(body, c.reason)) {
				t.Errorf("GET http://%s = %d %q, want %d naming %q", c.host, code, body, c.code, c.reason)
			}
			if scheme == "https" && (code != 0 || !strings.Contains(body, c.reason)) {
				t.Errorf("GET https://%s: %q, want the CONNECT refused naming %q", c.host, body, c.reason)
			}
			recs := rec.all()[before:]
			if len(recs) != 1 || recs[0].Allowed || !strings.Contains(recs[0].Reason, c.reason) {
				t.Errorf("%s://%s: records %+v, want one denied with %q", scheme, c.host, recs, c.reason)
			}
		}
	}
	if d := fn.dials(); len(d) != 0 {
		t.Errorf("the proxy dialled %v for refused requests", d)
	}
}

// TestRedirectIsNotFollowed: a redirect from an allowed host to a forbidden
// one goes back to the client, and the client's next request is refused.
func TestRedirectIsNotFollowed(t *testing.T) {
	fn, _, rec, client := forwardSetup(t, Config{}, allowExample, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	code, _, hdr := get(t, client, "http://allowed.example/go")
	if code != http.StatusFound || hdr.Get("Location") != "http://169.254.169.254/latest/meta-data/" {
		t.Fatalf("GET = %d Location %q, want the 302 passed back as it is", code, hdr.Get("Location"))
	}
	code, body, _ := get(t, client, hdr.Get("Location"))
	if code != http.StatusForbidden || !strings.Contains(body, "169.254.169.254") {
		t.Errorf("following the redirect = %d %q, want 403", code, body)
	}
	// A client that follows redirects itself gets the refusal at the end.
	follow := &http.Client{Transport: client.Transport}
	resp, err := follow.Get("http://allowed.example/go")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a following client ends with %d, want 403", resp.StatusCode)
	}
	if d := fn.dials(); len(d) != 2 {
		t.Errorf("dialled %v, want only the two requests to the allowed host", d)
	}
	recs := waitRecords(t, rec, 4)
	if len(recs) != 4 || !recs[0].Allowed || recs[1].Allowed || recs[1].Reason != "not on the allowlist" {
		t.Errorf("records = %+v, want allowed, denied (not on the allowlist), allowed, denied", recs)
	}
}

// TestDNSRebinding: the name answers a public address, then 127.0.0.1. The
// proxy dials the address it checked, and the next request, which resolves
// to loopback, is refused.
func TestDNSRebinding(t *testing.T) {
	fn, _, rec, client := forwardSetup(t, Config{}, allowExample, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "public")
	}))
	fn.answer("rebind.example", "203.0.113.10", "127.0.0.1")
	code, body, _ := get(t, client, "http://rebind.example/")
	if code != 200 || body != "public" {
		t.Fatalf("first GET = %d %q, want the public origin", code, body)
	}
	if d := fn.dials(); len(d) != 1 || d[0] != "203.0.113.10:80" {
		t.Fatalf("dialled %v, want exactly the checked 203.0.113.10:80", d)
	}
	if n := fn.res.calls["rebind.example"]; n != 1 {
		t.Errorf("resolved %d times for one request, want 1 (no second lookup)", n)
	}
	code, body, _ = get(t, client, "http://rebind.example/")
	if code != 403 || !strings.Contains(body, "loopback address 127.0.0.1") {
		t.Errorf("second GET = %d %q, want 403 for the rebound loopback answer", code, body)
	}
	if d := fn.dials(); len(d) != 1 {
		t.Errorf("dialled %v, want nothing new", d)
	}
	if recs := waitRecords(t, rec, 2); len(recs) != 2 || !recs[0].Allowed || recs[1].Allowed {
		t.Errorf("records = %+v", recs)
	}
}

func TestClassify(t *testing.T) {
	cases := map[string]string{
		"203.0.113.10":           "",
		"8.8.8.8":                "",
		"2606:4700::1":           "",
		"127.0.0.1":              "a loopback",
		"127.8.9.1":              "a loopback",
		"::1":                    "a loopback",
		"0.0.0.0":                "an unspecified",
		"::":                     "an unspecified",
		"10.0.0.1":               "a private",
		"172.31.255.255":         "a private",
		"192.168.1.1":            "a private",
		"fd12::1":                "a private",
		"169.254.169.254":        "a cloud metadata",
		"fd00:ec2::254":          "a cloud metadata",
		"169.254.1.1":            "a link-local",
		"fe80::1":                "a link-local",
		"100.64.0.1":             "a shared (CGNAT)",
		"100.127.255.254":        "a shared (CGNAT)",
		"224.0.0.1":              "a multicast",
		"ff02::1":                "a multicast",
		"255.255.255.255":        "a reserved",
		"::ffff:10.0.0.1":        "a private",
		"::ffff:169.254.169.254": "a cloud metadata",
		"64:ff9b::a00:1":         "a private", // NAT64 of 10.0.0.1
		"64:ff9b::808:808":       "",
		"2002:7f00:1::1":         "a loopback", // 6to4 of 127.0.0.1
	}
	for s, want := range cases {
		if got := classify(netip.MustParseAddr(s)); got != want {
			t.Errorf("classify(%s) = %q, want %q", s, got, want)
		}
	}
}

// TestMaxConns: past MaxConns a connection is answered 429 naming the
// limit, and recorded; the session still works after.
func TestMaxConns(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer origin.Close()
	fn := newFakeNet()
	fn.route("example.com", "203.0.113.11", 443, hostOf(origin.URL))
	p := mustNew(t, Config{Resolver: fn.res, Dial: fn.dial, MaxConns: 1})
	var rec recorder
	s := p.Open("s", allowExample, rec.add)
	_, addr := serveSession(t, s)
	tunnel := connect(t, addr, "example.com:443")
	code, body := rawGet(t, addr, "http://allowed.example/")
	if code != 429 || !strings.Contains(body, "too many connections") || !strings.Contains(body, "limit is 1") {
		t.Errorf("second connection = %d %q, want 429 naming the limit", code, body)
	}
	tunnel.Close()
	waitRecords(t, &rec, 2)
	var denied *Record
	for _, r := range rec.all() {
		if !r.Allowed {
			denied = &r
		}
	}
	if denied == nil || denied.Host != "allowed.example" || !strings.Contains(denied.Reason, "too many connections") {
		t.Errorf("records = %+v, want one denial for allowed.example naming the limit", rec.all())
	}
	// The slot is free again.
	deadline := time.Now().Add(5 * time.Second)
	for s.conns.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	connect(t, addr, "example.com:443").Close()
}

// connect opens a CONNECT tunnel through the proxy and checks the 200.
func connect(t *testing.T, proxyAddr, target string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return c
}

// rawGet sends one proxy request on a new connection.
func rawGet(t *testing.T, proxyAddr, u string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u, hostOf(u))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMaxBytes: a download past the session's byte limit is cut, recorded
// as cut, and the next request is refused naming the limit.
func TestMaxBytes(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	_, s, rec, client := forwardSetup(t, Config{MaxBytes: 100 << 10}, allowExample, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, big)
	}))
	code, body, _ := get(t, client, "http://allowed.example/big")
	if code == 200 && len(body) == len(big) {
		t.Fatalf("got the whole 1 MiB through a 100 KiB limit")
	}
	code, body, _ = get(t, client, "http://allowed.example/again")
	if code != 429 || !strings.Contains(body, "byte limit of 100 KiB") {
		t.Errorf("after the limit: %d %q, want 429 naming the byte limit", code, body)
	}
	recs := waitRecords(t, rec, 2)
	if len(recs) != 2 || !strings.Contains(recs[0].Reason, "byte limit") || recs[0].BytesDown > 200<<10 || recs[1].Allowed {
		t.Errorf("records = %+v, want the first cut at the byte limit, the second refused", recs)
	}
	if s.BytesUsed() > 200<<10 {
		t.Errorf("BytesUsed = %d, want about the 100 KiB limit", s.BytesUsed())
	}
}

// TestSetPolicyCutsTunnels: an open tunnel that the new policy does not
// allow is cut, and recorded so.
func TestSetPolicyCutsTunnels(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer origin.Close()
	fn := newFakeNet()
	fn.route("example.com", "203.0.113.11", 443, hostOf(origin.URL))
	p := mustNew(t, Config{Resolver: fn.res, Dial: fn.dial})
	var rec recorder
	s := p.Open("s", allowExample, rec.add)
	_, addr := serveSession(t, s)
	c := connect(t, addr, "example.com:443")
	defer c.Close()
	s.SetPolicy(Policy{Mode: ModeAllowlist, Allow: []string{"allowed.example"}})
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("the tunnel still reads after the policy dropped its host")
	}
	waitRecords(t, &rec, 1)
	if r := rec.all()[0]; r.Reason != "cut: the session's network policy changed" {
		t.Errorf("record = %+v, want cut by the policy change", r)
	}
}

// TestIdleTunnelIsCut: a tunnel with no traffic either way is cut after
// the idle time, so it does not hold a connection slot for ever.
func TestIdleTunnelIsCut(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer origin.Close()
	fn := newFakeNet()
	fn.route("example.com", "203.0.113.11", 443, hostOf(origin.URL))
	p := mustNew(t, Config{Resolver: fn.res, Dial: fn.dial})
	p.tunnelIdle = 200 * time.Millisecond
	var rec recorder
	_, addr := serveSession(t, p.Open("s", allowExample, rec.add))
	c := connect(t, addr, "example.com:443")
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("idle tunnel: read err %v, want it closed by the proxy", err)
	}
	if r := waitRecords(t, &rec, 1)[0]; r.Reason != "cut: idle for 200ms" {
		t.Errorf("record = %+v, want cut for idleness", r)
	}
}

// TestCloseCutsTunnels: closing the session ends Serve and its tunnels.
func TestCloseCutsTunnels(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer origin.Close()
	fn := newFakeNet()
	fn.route("example.com", "203.0.113.11", 443, hostOf(origin.URL))
	p := mustNew(t, Config{Resolver: fn.res, Dial: fn.dial})
	var rec recorder
	s := p.Open("s", allowExample, rec.add)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	c := connect(t, l.Addr().String(), "example.com:443")
	defer c.Close()
	s.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after Close = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("tunnel after Close: read err %v, want it closed", err)
	}
	if r := waitRecords(t, &rec, 1)[0]; r.Reason != "cut: the session was closed" {
		t.Errorf("record = %+v", r)
	}
	if err := s.Serve(l); err != nil {
		t.Errorf("Serve on a closed session = %v, want nil at once", err)
	}
}
