package egress

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Defaults for Config's zero values.
const (
	DefaultMaxConns   = 32
	DefaultMaxBytes   = 4 << 30 // 4 GiB per session, both ways
	DefaultCacheBytes = 2 << 30
	DefaultTunnelIdle = 10 * time.Minute // a CONNECT tunnel with no traffic is cut
)

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Config is the proxy's configuration, shared by all sessions.
type Config struct {
	Resolver    Resolver      // default net.DefaultResolver
	PyPIIndex   string        // upstream simple index URL; "" = read from the host's pip config at run time
	NPMRegistry string        // upstream registry URL; "" = read from the host's npm config at run time
	CacheDir    string        // content-addressed download cache; "" = no cache
	CacheBytes  int64         // bound on the cache; 0 = DefaultCacheBytes
	Packages    PackagePolicy // the administrator's package policy for the mirrors
	MaxConns    int           // concurrent connections per session; 0 = DefaultMaxConns
	MaxBytes    int64         // bytes per session (both ways); 0 = DefaultMaxBytes

	// Dial dials the address the proxy checked (an IP and a port, never a
	// name); default a net.Dialer. Tests route the checked public
	// addresses of their fake resolver to local servers with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Log gets the proxy's own failures (not the records); default
	// slog.Default().
	Log *slog.Logger
}

// Proxy is the egress proxy of one service. Its cache, upstreams and package
// policy are shared by all sessions.
type Proxy struct {
	cfg      Config
	resolver Resolver
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	log      *slog.Logger
	key      []byte // signs the download links the mirrors write

	// hostAddrs are the host's own addresses; a field so tests can fake it.
	hostAddrs func() []net.IP
	// tunnelIdle cuts a CONNECT tunnel with no traffic either way.
	tunnelIdle time.Duration

	mirrors *mirrors
}

// New checks cfg and makes a proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.MaxConns < 0 || cfg.MaxBytes < 0 || cfg.CacheBytes < 0 {
		return nil, kiln.Errorf(kiln.Invalid, "egress: MaxConns, MaxBytes and CacheBytes must not be negative (0 means the default)")
	}
	if err := cfg.Packages.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	p := &Proxy{cfg: cfg, resolver: cfg.Resolver, dial: cfg.Dial, log: cfg.Log, hostAddrs: interfaceAddrs, tunnelIdle: DefaultTunnelIdle}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		p.dial = d.DialContext
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.key = make([]byte, 32)
	if _, err := rand.Read(p.key); err != nil {
		return nil, fmt.Errorf("egress: link key: %w", err)
	}
	m, err := newMirrors(p)
	if err != nil {
		return nil, err
	}
	p.mirrors = m
	return p, nil
}

// Session is one sandbox's view of the proxy: its policy, its bounds and
// its record callback.
type Session struct {
	p      *Proxy
	id     string
	record func(Record)

	pol   atomic.Pointer[sessionPolicy]
	conns atomic.Int64 // accepted connections open now
	bytes atomic.Int64 // bytes both ways so far

	mu      sync.Mutex
	closed  bool
	servers map[*http.Server]struct{}
	active  map[*tunnel]struct{} // open upstream connections, cut on SetPolicy or Close
}

// sessionPolicy is a policy with its parsed allowlist.
type sessionPolicy struct {
	Policy
	entries []entry
}

// Open starts a session with a policy and a record callback (nil: none).
// record may be called from many goroutines at once. An invalid policy is
// treated as "none".
func (p *Proxy) Open(sessionID string, pol Policy, record func(Record)) *Session {
	if record == nil {
		record = func(Record) {}
	}
	s := &Session{p: p, id: sessionID, record: record, servers: map[*http.Server]struct{}{}, active: map[*tunnel]struct{}{}}
	s.SetPolicy(pol)
	return s
}

// SetPolicy changes the session's policy. Requests from then on are checked
// against it, and open connections it no longer allows are cut. An invalid
// policy is treated as "none" (callers Validate first).
func (s *Session) SetPolicy(pol Policy) {
	es, err := pol.entries()
	if err != nil {
		s.p.log.Warn("egress: invalid policy treated as none", "session", s.id, "err", err)
		pol, es = None, nil
	}
	sp := &sessionPolicy{Policy: pol, entries: es}
	s.pol.Store(sp)
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range s.active {
		if sp.IsNone() || (t.kind != KindPyPI && t.kind != KindNPM && !allows(es, t.host, t.port)) {
			t.cut("the session's network policy changed")
		}
	}
}

// Policy is the session's current policy.
func (s *Session) Policy() Policy { return s.pol.Load().Policy }

// BytesUsed is the number of bytes the session has moved, both ways.
func (s *Session) BytesUsed() int64 { return s.bytes.Load() }

// Serve serves the proxy protocol on l until l or the session is closed.
// It returns nil then, or the listener's error.
func (s *Session) Serve(l net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.servers[srv] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.servers, srv)
		s.mu.Unlock()
	}()
	err := srv.Serve(&limitListener{Listener: l, s: s})
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops every Serve of the session and cuts its connections.
func (s *Session) Close() {
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	s.servers = map[*http.Server]struct{}{}
	for t := range s.active {
		t.cut("the session was closed")
	}
	s.mu.Unlock()
	for srv := range servers {
		srv.Close()
	}
}

// ServeHTTP routes one request: CONNECT and absolute URIs to the forward
// proxy, /pypi/ and /npm/ to the mirrors.
func (s *Session) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		s.serveConnect(w, r)
	case r.URL.IsAbs():
		s.serveHTTP(w, r)
	case strings.HasPrefix(r.URL.Path, "/pypi/"):
		s.p.mirrors.servePyPI(s, w, r)
	case strings.HasPrefix(r.URL.Path, "/npm/"):
		s.p.mirrors.serveNPM(s, w, r)
	default:
		refuse(w, http.StatusNotFound, "kiln egress proxy: %q is not served here; use this address as HTTP_PROXY/HTTPS_PROXY, or its /pypi/simple/ and /npm/ package mirrors", truncate(r.URL.Path, 100))
	}
}

// noneMessage is the answer to every request under the policy "none".
const noneMessage = `kiln: this session's network policy is "none"; no network access is allowed. The session's owner may set an allowlist policy (within the server's ceiling) to allow hosts and the package mirrors.`

// refuse writes a refusal: plain text, and the message in the reason
// phrase too, since pip and other clients show the reason phrase and not
// the body. The connection is closed after it.
func refuse(w http.ResponseWriter, code int, format string, args ...any) {
	writeRefusal(w, code, fmt.Sprintf(format, args...), false)
}

// writeRefusal writes msg as a refusal; asJSON puts it in {"error": msg},
// which npm shows.
func writeRefusal(w http.ResponseWriter, code int, msg string, asJSON bool) {
	ctype, body := "text/plain; charset=utf-8", msg+"\n"
	if asJSON {
		b, _ := json.Marshal(map[string]string{"error": msg})
		ctype, body = "application/json", string(b)+"\n"
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Connection", "close")
		w.WriteHeader(code)
		io.WriteString(w, body)
		return
	}
	defer c.Close()
	phrase := reasonPhrase(msg)
	if asJSON { // npm prints the status text and the error: say it once
		phrase = http.StatusText(code)
	}
	fmt.Fprintf(brw, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, phrase, ctype, len(body), body)
	brw.Flush()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// limitListener bounds the session's open connections: one past the bound
// is answered with 429 and closed.
type limitListener struct {
	net.Listener
	s *Session
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.s.conns.Add(1); n > int64(l.s.p.cfg.MaxConns) {
			l.s.conns.Add(-1)
			go l.s.overLimit(c)
			continue
		}
		return &sessionConn{Conn: c, s: l.s}, nil
	}
}

// sessionConn gives back its slot once when closed.
type sessionConn struct {
	net.Conn
	s    *Session
	once sync.Once
}

// CloseWrite half-closes the connection where the transport can, so a
// tunnel can pass on the end of one direction.
func (c *sessionConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *sessionConn) Close() error {
	c.once.Do(func() { c.s.conns.Add(-1) })
	return c.Conn.Close()
}

// overLimit answers a connection past MaxConns: it reads the request to
// name its target in the record, then refuses it.
func (s *Session) overLimit(c net.Conn) {
	defer c.Close()
	reason := fmt.Sprintf("too many connections: this session has %d open, the limit is %d", s.p.cfg.MaxConns, s.p.cfg.MaxConns)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	rec := Record{Time: time.Now(), Kind: KindHTTP, Reason: reason}
	if r, err := http.ReadRequest(newLimitedBufReader(c)); err == nil {
		rec.Host, rec.Port, rec.Kind = targetOf(r)
	}
	s.record(rec)
	body := "kiln: " + reason + "\n"
	fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}
