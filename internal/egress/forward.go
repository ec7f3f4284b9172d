package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tunnel is one open upstream connection of a session.
type tunnel struct {
	kind string
	host string
	port int

	mu     sync.Mutex
	reason string // why it was cut, if it was
	closer io.Closer
}

// cut closes the tunnel's upstream connection for reason.
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

// targetOf is the host, port and record kind a request asks for.
func targetOf(r *http.Request) (host string, port int, kind string) {
	kind = KindHTTP
	hostport := r.Host
	defPort := 80
	if r.Method == http.MethodConnect {
		kind, defPort = KindConnect, 443
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
		if n, err := strconv.Atoi(p); err == nil {
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

func (s *Session) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.denyUnlessAllowed(w, r)
}

// denyUnlessAllowed is the skeleton's forward proxy: it refuses everything.
func (s *Session) denyUnlessAllowed(w http.ResponseWriter, r *http.Request) {
	host, port, kind := targetOf(r)
	rec := Record{Time: time.Now(), Host: host, Port: port, Kind: kind}
	if s.pol.Load().IsNone() {
		rec.Reason = "network policy is none"
		s.record(rec)
		s.deny(w, r, http.StatusForbidden, noneMessage)
		return
	}
	rec.Reason = "the forward proxy is not built yet"
	s.record(rec)
	s.deny(w, r, http.StatusNotImplemented, "kiln: the egress proxy does not forward yet")
}

func (s *Session) serveConnect(w http.ResponseWriter, r *http.Request) {
	s.denyUnlessAllowed(w, r)
}

// deny answers a refused request. A refused CONNECT carries the message in
// its reason phrase too, because clients show that and not the body
// (pip: "Tunnel connection failed: 403 kiln: ...").
func (s *Session) deny(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if r.Method != http.MethodConnect {
		refuse(w, code, "%s", msg)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		refuse(w, code, "%s", msg)
		return
	}
	defer c.Close()
	body := msg + "\n"
	fmt.Fprintf(brw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, reasonPhrase(msg), len(body), body)
	brw.Flush()
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

// interfaceAddrs are the host's own addresses.
func interfaceAddrs() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips
}
