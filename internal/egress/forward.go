package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Timeouts of the forward proxy's steps.
const (
	resolveTimeout = 5 * time.Second
	dialTimeout    = 10 * time.Second
	headerTimeout  = 60 * time.Second
)

// errByteLimit ends a copy when the session's byte budget is spent.
var errByteLimit = errors.New("the session's egress byte limit is reached")

// tunnel is one open upstream connection of a session.
type tunnel struct {
	kind string
	host string
	port int

	mu     sync.Mutex
	reason string // why it was cut, if it was
	closer io.Closer
}

// cut closes the tunnel's connections for reason.
func (t *tunnel) cut(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reason == "" {
		t.reason = reason
	}
	if t.closer != nil {
		t.closer.Close()
	}
}

func (t *tunnel) cutReason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reason
}

// targetOf is the host, port and record kind a request asks for; port 0
// when the port is not a number.
func targetOf(r *http.Request) (host string, port int, kind string) {
	kind = KindHTTP
	hostport := r.Host
	defPort := 80
	if r.Method == http.MethodConnect {
		kind, defPort = KindConnect, 0 // CONNECT names its port
	} else if r.URL.IsAbs() {
		hostport = r.URL.Host
		if r.URL.Scheme == "https" {
			defPort = 443
		}
	}
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		h, p = hostport, ""
	}
	port = defPort
	if p != "" {
		if n, err := strconv.Atoi(p); err == nil && n > 0 && n < 65536 {
			port = n
		} else {
			port = 0
		}
	}
	return strings.TrimSuffix(strings.ToLower(h), "."), port, kind
}

func newLimitedBufReader(c net.Conn) *bufio.Reader {
	return bufio.NewReader(io.LimitReader(c, 64<<10))
}

// refusal is why a request was not forwarded: the status, the message for
// the client and the reason for the record.
type refusal struct {
	code   int
	msg    string
	reason string
}

// dialChecked applies the session's policy to host:port, resolves the name
// with the proxy's resolver, checks every address, and dials the first
// checked address itself (never the name: no second lookup). It fills
// rec.Addr with the address dialled.
func (s *Session) dialChecked(ctx context.Context, host string, port int, rec *Record) (net.Conn, *refusal) {
	sp := s.pol.Load()
	if sp.IsNone() {
		return nil, &refusal{http.StatusForbidden, noneMessage, "network policy is none"}
	}
	if r := s.overBytes(); r != nil {
		return nil, r
	}
	if host == "" || port == 0 {
		return nil, &refusal{http.StatusBadRequest, "kiln: the request names no valid host and port", "bad target"}
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return nil, &refusal{http.StatusForbidden, fmt.Sprintf("kiln: %s refused: not on the allowlist (it holds domain names, never IP addresses); network policy %s", host, describe(sp.Policy)), "not on the allowlist"}
	}
	if !allows(sp.entries, host, port) {
		return nil, &refusal{http.StatusForbidden, fmt.Sprintf("kiln: %s:%d refused: not on the allowlist; network policy %s", host, port, describe(sp.Policy)), "not on the allowlist"}
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	addrs, err := s.p.resolver.LookupIPAddr(rctx, host)
	cancel()
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		return nil, &refusal{http.StatusBadGateway, fmt.Sprintf("kiln: cannot resolve %s: %v", host, err), "cannot resolve: " + err.Error()}
	}
	// Every answer must pass: a name that also points inside is refused
	// outright rather than dialled at its one public address.
	ips := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if why := s.p.checkAddr(ip); why != "" {
			rec.Addr = ip.String()
			return nil, &refusal{http.StatusForbidden, fmt.Sprintf("kiln: %s:%d refused: %s; the egress proxy never connects there", host, port, why), why}
		}
		ips = append(ips, ip)
	}
	var lastErr error
	for _, ip := range ips {
		rec.Addr = ip.String()
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		c, err := s.p.dial(dctx, "tcp", netip.AddrPortFrom(ip, uint16(port)).String())
		cancel()
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, &refusal{http.StatusBadGateway, fmt.Sprintf("kiln: cannot connect to %s:%d: %v", host, port, lastErr), "cannot connect: " + lastErr.Error()}
}

// overBytes refuses a new request once the byte budget is spent.
func (s *Session) overBytes() *refusal {
	if used, limit := s.bytes.Load(), s.p.cfg.MaxBytes; used >= limit {
		msg := fmt.Sprintf("kiln: this session has used its egress byte limit of %s", kiln.FormatBytes(limit))
		return &refusal{http.StatusTooManyRequests, msg, "byte limit reached: " + kiln.FormatBytes(limit)}
	}
	return nil
}

// track registers an open upstream connection so SetPolicy and Close can
// cut it; it returns false when the session is closed.
func (s *Session) track(t *tunnel) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active[t] = struct{}{}
	return true
}

func (s *Session) untrack(t *tunnel) {
	s.mu.Lock()
	delete(s.active, t)
	s.mu.Unlock()
}

// meter counts bytes read through it, into its own count and the
// session's, and fails once the session's budget is spent.
type meter struct {
	r    io.Reader
	s    *Session
	n    int64
	last *atomic.Int64 // if set, the unix nanoseconds of the last read
}

func (m *meter) Read(b []byte) (int, error) {
	// Read no more than the budget has left, so a large buffer cannot
	// overshoot it; sessions racing on it overshoot by one read at most.
	left := m.s.p.cfg.MaxBytes - m.s.bytes.Load()
	if left <= 0 {
		return 0, errByteLimit
	}
	if int64(len(b)) > left {
		b = b[:left]
	}
	n, err := m.r.Read(b)
	m.n += int64(n)
	m.s.bytes.Add(int64(n))
	if m.last != nil && n > 0 {
		m.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// serveConnect serves CONNECT host:port: checks, dials, then copies both
// ways until either side ends.
func (s *Session) serveConnect(w http.ResponseWriter, r *http.Request) {
	host, port, _ := targetOf(r)
	rec := Record{Time: time.Now(), Host: host, Port: port, Kind: KindConnect}
	up, ref := s.dialChecked(r.Context(), host, port, &rec)
	if ref != nil {
		rec.Reason = ref.reason
		s.record(rec)
		s.deny(w, r, ref.code, ref.msg)
		return
	}
	rec.Allowed = true
	t := &tunnel{kind: KindConnect, host: host, port: port}
	if !s.track(t) {
		up.Close()
		rec.Reason = "the session was closed"
		s.record(rec)
		s.deny(w, r, http.StatusServiceUnavailable, "kiln: the session is closing")
		return
	}
	defer s.untrack(t)
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		rec.Reason = "cannot take over the client connection"
		s.record(rec)
		return
	}
	t.mu.Lock()
	t.closer = closers{up, client}
	t.mu.Unlock()
	defer client.Close()
	defer up.Close()
	if _, err := brw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n"); err == nil {
		err = brw.Flush()
	}
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	upm := &meter{r: brw.Reader, s: s, last: &last} // holds whatever the client sent early
	downm := &meter{r: up, s: s, last: &last}
	errc := make(chan error, 2)
	go func() { errc <- pipe(up, upm) }()
	go func() { errc <- pipe(client, downm) }()
	done := make(chan struct{})
	go s.p.cutWhenIdle(t, &last, done)
	err1, err2 := <-errc, <-errc
	close(done)
	rec.BytesUp, rec.BytesDown = upm.n, downm.n
	rec.Reason = endReason(t, err1, err2)
	s.record(rec)
}

// cutWhenIdle cuts t once nothing has passed either way for the proxy's
// tunnelIdle, so a forgotten tunnel does not hold one of the session's
// connections for ever.
func (p *Proxy) cutWhenIdle(t *tunnel, last *atomic.Int64, done <-chan struct{}) {
	tick := time.NewTicker(min(p.tunnelIdle/4, time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if time.Since(time.Unix(0, last.Load())) >= p.tunnelIdle {
				t.cut(fmt.Sprintf("idle for %v", p.tunnelIdle))
				return
			}
		}
	}
}

// pipe copies src to dst, then half-closes dst so the other side sees the
// end; on an error it closes dst entirely, which ends the other copy.
func pipe(dst net.Conn, src io.Reader) error {
	_, err := io.Copy(dst, src)
	if err != nil {
		dst.Close()
		return err
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
	return nil
}

// endReason says why an allowed connection ended early, or "".
func endReason(t *tunnel, errs ...error) string {
	if why := t.cutReason(); why != "" {
		return "cut: " + why
	}
	for _, err := range errs {
		if errors.Is(err, errByteLimit) {
			return "cut: " + errByteLimit.Error()
		}
	}
	return ""
}

// closers closes several things.
type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

// hopHeaders are the hop-by-hop headers (RFC 9110 7.6.1), never forwarded,
// and the client's proxy credentials, never sent on.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// stripHop removes hop-by-hop headers, including those Connection names.
func stripHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// serveHTTP forwards one absolute-URI request to its origin over a
// connection of its own and passes the answer back as it is: a redirect
// goes back to the client, whose next request is checked again.
func (s *Session) serveHTTP(w http.ResponseWriter, r *http.Request) {
	host, port, _ := targetOf(r)
	rec := Record{Time: time.Now(), Host: host, Port: port, Kind: KindHTTP}
	if r.URL.Scheme != "http" {
		rec.Reason = "unsupported scheme " + truncate(r.URL.Scheme, 20)
		s.record(rec)
		refuse(w, http.StatusBadRequest, "kiln: the egress proxy forwards http:// URLs; for https:// the client must use CONNECT")
		return
	}
	up, ref := s.dialChecked(r.Context(), host, port, &rec)
	if ref != nil {
		rec.Reason = ref.reason
		s.record(rec)
		refuse(w, ref.code, "%s", ref.msg)
		return
	}
	rec.Allowed = true
	t := &tunnel{kind: KindHTTP, host: host, port: port, closer: up}
	if !s.track(t) {
		up.Close()
		rec.Reason = "the session was closed"
		s.record(rec)
		refuse(w, http.StatusServiceUnavailable, "kiln: the session is closing")
		return
	}
	defer s.untrack(t)
	defer up.Close()
	upm := &meter{r: r.Body, s: s}
	downm := &meter{s: s}
	defer func() {
		rec.BytesUp, rec.BytesDown = upm.n, downm.n
		if rec.Reason == "" {
			rec.Reason = endReason(t)
		}
		s.record(rec)
	}()
	out := &http.Request{
		Method:        r.Method,
		URL:           r.URL,
		Host:          r.URL.Host,
		Header:        r.Header.Clone(),
		ContentLength: r.ContentLength,
		Close:         true,
	}
	if r.ContentLength != 0 {
		out.Body = io.NopCloser(upm)
	}
	stripHop(out.Header)
	out.Header.Del("Expect") // the server already answered 100-continue
	if out.Header.Get("User-Agent") == "" {
		out.Header["User-Agent"] = []string{""} // Write adds Go's own otherwise
	}
	up.SetDeadline(time.Now().Add(headerTimeout))
	resp, err := writeAndRead(up, out)
	if err != nil {
		rec.Reason = "upstream failed: " + endReasonOr(t, upm, err)
		refuse(w, http.StatusBadGateway, "kiln: %s:%d: %s", host, port, rec.Reason)
		return
	}
	defer resp.Body.Close()
	up.SetDeadline(time.Time{})
	stripHop(resp.Header)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	downm.r = resp.Body
	if err := copyFlush(w, downm); err != nil {
		rec.Reason = endReason(t, err)
		if rec.Reason == "" {
			rec.Reason = "transfer failed: " + err.Error()
		}
		// The status is sent: abort, so the client sees a cut body, not
		// a short one that looks whole.
		defer panic(http.ErrAbortHandler)
	}
}

func endReasonOr(t *tunnel, m *meter, err error) string {
	if why := endReason(t, err); why != "" {
		return why
	}
	if m.s.bytes.Load() >= m.s.p.cfg.MaxBytes {
		return "cut: " + errByteLimit.Error()
	}
	return err.Error()
}

// writeAndRead sends req on c and reads the response head.
func writeAndRead(c net.Conn, req *http.Request) (*http.Response, error) {
	werr := make(chan error, 1)
	go func() { werr <- req.Write(c) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		if e := <-werr; e != nil {
			return nil, e
		}
		return nil, err
	}
	return resp, nil
}

// copyBufs are copyFlush's buffers, large for bulk throughput.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyFlush copies src to w. It flushes whenever src has nothing more at
// hand (a read shorter than the buffer), so streamed answers (server-sent
// events, long polls) arrive as they come, while a bulk download is not
// slowed by a flush per write.
func copyFlush(w http.ResponseWriter, src io.Reader) error {
	rc := http.NewResponseController(w)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if n < len(buf) {
				rc.Flush()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// deny answers a refused request (a CONNECT too: its refusal is an
// ordinary response before any tunnel).
func (s *Session) deny(w http.ResponseWriter, r *http.Request, code int, msg string) {
	writeRefusal(w, code, msg, false)
}

// reasonPhrase makes msg safe as an HTTP reason phrase: one line of
// printable ASCII, not too long.
func reasonPhrase(msg string) string {
	b := make([]byte, 0, len(msg))
	for _, c := range []byte(msg) {
		if c < 0x20 || c > 0x7e {
			c = ' '
		}
		b = append(b, c)
	}
	return truncate(string(b), 300)
}
