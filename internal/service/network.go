package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// Network policy per session (issue 13). The service owns one egress
// proxy. Every sandbox it makes, pooled ones too, gets a proxy session
// served on a unix socket of its own under <data>/egress, which the
// backend makes the sandbox's only way out (backend.Spec.EgressSocket).
// A session starts with the policy "none"; its own policy is set when it
// is created or takes a pooled sandbox, and changed by SetNetwork within
// the server's ceiling (Config.NetworkCeiling; admins may exceed it).
// Each connection attempt goes to the audit log and to the result of the
// cell that was running (or the next one, as output between cells does).

// netPlane is the service's egress proxy and the directory of its sockets.
type netPlane struct {
	proxy *egress.Proxy
	dir   string
	// dirFD is the socket directory, open: sockets are made through
	// /proc/self/fd/<n>/<name>, which is short whatever the data
	// directory's path (a unix socket's path has at most 107 bytes).
	dirFD *os.File
	audit func(ctx context.Context, e store.AuditEntry)

	mu   sync.Mutex
	open map[*netSession]struct{}
}

// netSocketDir is where the proxy sessions' sockets live, under the data
// directory. 0711: each sandbox's root crosses it to bind its own socket
// (a random name) and can list nothing.
const netSocketDir = "egress"

func newNetPlane(dataDir string, cfg egress.Config, audit func(context.Context, store.AuditEntry), log *slog.Logger) (*netPlane, error) {
	if cfg.Log == nil {
		cfg.Log = log // the proxy's own failures go to the service's log
	}
	proxy, err := egress.New(cfg)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(dataDir, netSocketDir)
	// What a previous run left (it crashed) goes: no sandbox of it lives.
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("egress sockets: %w", err)
	}
	if err := os.Mkdir(dir, 0o711); err != nil {
		return nil, fmt.Errorf("egress sockets: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil { // the umask may have taken bits
		return nil, fmt.Errorf("egress sockets: %w", err)
	}
	dirFD, err := openSocketDir(dir)
	if err != nil {
		return nil, fmt.Errorf("egress sockets: %w", err)
	}
	return &netPlane{proxy: proxy, dir: dir, dirFD: dirFD, audit: audit, open: map[*netSession]struct{}{}}, nil
}

// netSession is one sandbox's proxy session and its socket, with the
// records not yet given to a cell.
type netSession struct {
	plane *netPlane
	ps    *egress.Session
	ln    net.Listener
	path  string // on the host
	serve sync.WaitGroup
	conns atomic.Int64 // proxy connections open now
	last  atomic.Int64 // when bytes last moved on one, unix nanoseconds

	mu      sync.Mutex
	owner   string // the session's user, "" while pooled
	session string
	exec    string // the running cell's execution, "" between cells
	pending []kiln.EgressRecord
	dropped int // records past kiln.MaxCellEgress since the last take
	closed  bool
}

// openNet opens a proxy session with pol on a new socket. It is cheap: a
// listener and a goroutine.
func (p *netPlane) openNet(sessionID, owner string, pol kiln.NetworkPolicy) (*netSession, error) {
	var b [12]byte
	rand.Read(b[:])
	name := hex.EncodeToString(b[:]) + ".sock"
	ln, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", p.dirFD.Fd(), name))
	if err != nil {
		return nil, kiln.Wrap(kiln.Internal, err, "cannot make the sandbox's egress socket")
	}
	n := &netSession{plane: p, path: filepath.Join(p.dir, name), owner: owner, session: sessionID}
	n.ln = &countingListener{Listener: ln, n: n}
	n.ps = p.proxy.Open(sessionID, toEgress(pol), n.record)
	p.mu.Lock()
	p.open[n] = struct{}{}
	p.mu.Unlock()
	n.serve.Add(1)
	go func() {
		defer n.serve.Done()
		n.ps.Serve(n.ln)
	}()
	return n, nil
}

// close ends every proxy session still open (the service is stopping).
func (p *netPlane) close() {
	p.mu.Lock()
	all := make([]*netSession, 0, len(p.open))
	for n := range p.open {
		all = append(all, n)
	}
	p.mu.Unlock()
	for _, n := range all {
		n.close()
	}
	p.dirFD.Close()
}

// count is the number of proxy sessions open, for tests.
func (p *netPlane) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.open)
}

// close stops serving, cuts the session's connections and removes the
// socket. It is safe to call more than once and on nil.
func (n *netSession) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	n.ps.Close()
	n.ln.Close()
	n.serve.Wait()
	os.Remove(n.path) // the listener unlinks it; this covers a failed unlink
	n.plane.mu.Lock()
	delete(n.plane.open, n)
	n.plane.mu.Unlock()
}

// socket is the host path of the session's socket; "" for none.
func (n *netSession) socket() string {
	if n == nil {
		return ""
	}
	return n.path
}

// adopt gives a pooled sandbox's proxy session to a user's session.
func (n *netSession) adopt(sessionID, owner string, pol kiln.NetworkPolicy) {
	n.mu.Lock()
	n.session, n.owner = sessionID, owner
	n.pending, n.dropped = nil, 0 // the warm-up's, if any: nobody's
	n.mu.Unlock()
	n.ps.SetPolicy(toEgress(pol))
}

// setPolicy changes the policy; open connections it no longer allows
// are cut by the proxy.
func (n *netSession) setPolicy(pol kiln.NetworkPolicy) {
	if n != nil {
		n.ps.SetPolicy(toEgress(pol))
	}
}

// record is the proxy's callback: one connection attempt, when it ends.
func (n *netSession) record(r egress.Record) {
	rec := fromEgress(r)
	n.mu.Lock()
	owner, session, exec := n.owner, n.session, n.exec
	if owner != "" {
		if len(n.pending) < kiln.MaxCellEgress {
			n.pending = append(n.pending, rec)
		} else {
			n.dropped++
		}
	}
	n.mu.Unlock()
	if owner == "" {
		return // a pooled sandbox's: no user, nothing ran
	}
	outcome := "denied"
	if rec.Allowed {
		outcome = "allowed"
	}
	n.plane.audit(context.Background(), store.AuditEntry{UserID: owner, Action: "egress", SessionID: session,
		ExecutionID: exec, Time: rec.Time, Outcome: outcome, Detail: jsonDetail(rec)})
}

// beginCell marks the start of an execution: records from now on name it
// in the audit log.
func (n *netSession) beginCell(execID string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.exec = execID
	n.mu.Unlock()
}

// A cell's end waits for the proxy to finish the connections still busy,
// whose records come when they end: at most cellSettle, and only while
// bytes moved on an open connection within cellQuiet. A connection kept
// open and idle (a kernel's keep-alive pool) costs nothing; its next
// request is recorded with a later cell.
const (
	cellSettle = 250 * time.Millisecond
	cellQuiet  = 50 * time.Millisecond
)

// settling says whether a cell's end should wait on: connections are
// open and one was busy within cellQuiet.
func settling(conns int64, last, now time.Time) bool {
	return conns > 0 && now.Sub(last) < cellQuiet
}

// endCell returns the records since the last cell ended.
func (n *netSession) endCell() []kiln.EgressRecord {
	if n == nil {
		return nil
	}
	for deadline := time.Now().Add(cellSettle); time.Now().Before(deadline) &&
		settling(n.conns.Load(), time.Unix(0, n.last.Load()), time.Now()); {
		time.Sleep(5 * time.Millisecond)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.pending
	if n.dropped > 0 {
		out = append(out, kiln.EgressRecord{Time: time.Now(), Kind: "dropped",
			Reason: fmt.Sprintf("%d more connection attempts are in the audit log only (a cell's result keeps %d)", n.dropped, kiln.MaxCellEgress)})
	}
	n.pending, n.dropped, n.exec = nil, 0, ""
	return out
}

// countingListener counts the session's open connections and stamps
// when bytes last moved on one.
type countingListener struct {
	net.Listener
	n *netSession
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.n.conns.Add(1)
	l.n.last.Store(time.Now().UnixNano())
	return &countedConn{Conn: c, n: l.n}, nil
}

type countedConn struct {
	net.Conn
	n    *netSession
	once sync.Once
}

func (c *countedConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.last.Store(time.Now().UnixNano())
	return k, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	k, err := c.Conn.Write(p)
	c.n.last.Store(time.Now().UnixNano())
	return k, err
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.n.conns.Add(-1) })
	return c.Conn.Close()
}

func toEgress(p kiln.NetworkPolicy) egress.Policy {
	return egress.Policy{Mode: p.Mode, Allow: p.Allow}
}

func fromEgress(r egress.Record) kiln.EgressRecord {
	return kiln.EgressRecord{Time: r.Time, Host: r.Host, Port: r.Port, Addr: r.Addr, Kind: r.Kind, Allowed: r.Allowed,
		Reason: r.Reason, BytesUp: r.BytesUp, BytesDown: r.BytesDown, Package: r.Package, Cached: r.Cached}
}

// checkNetwork checks a session's policy for u: valid, and within the
// server's ceiling unless u is an admin. It returns the policy with ""
// read as "none".
func (s *Service) checkNetwork(u kiln.User, p kiln.NetworkPolicy) (kiln.NetworkPolicy, error) {
	p = p.Normal()
	if err := toEgress(p).Validate(); err != nil {
		return p, err
	}
	if u.Admin {
		return p, nil
	}
	// Within's error names the ceiling and that only an admin may exceed it.
	return p, toEgress(p).Within(toEgress(s.cfg.NetworkCeiling))
}

// SetNetwork changes the network policy of u's live session, within the
// server's ceiling (admins may exceed it). Connections the new policy no
// longer allows are cut.
func (s *Service) SetNetwork(ctx context.Context, u kiln.User, id string, p kiln.NetworkPolicy) (kiln.Session, error) {
	l, err := s.liveFor(ctx, u, id)
	if err != nil {
		return kiln.Session{}, err
	}
	p, err = s.checkNetwork(u, p)
	if err != nil {
		return kiln.Session{}, err
	}
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return kiln.Session{}, errEnded
	}
	// Stored first: a policy that would not come back after a restart is
	// not set.
	if err := s.store.SetNetwork(ctx, l.rec.UserID, id, p); err != nil {
		l.mu.Unlock()
		return kiln.Session{}, err
	}
	l.policy = p
	n := l.net
	l.mu.Unlock()
	n.setPolicy(p)
	s.audit(ctx, store.AuditEntry{UserID: u.ID, Action: "session.network", SessionID: id, Outcome: "ok",
		Detail: jsonDetail(p)})
	return s.Session(ctx, u, id)
}

// netOf is the session's proxy session, opened on first need (a session
// resumed after a restart has none), for its next sandbox.
func (l *live) netOfLocked() (*netSession, error) {
	if l.net != nil || l.nets == nil {
		return l.net, nil
	}
	n, err := l.nets.openNet(l.rec.ID, l.rec.UserID, l.policy)
	if err != nil {
		return nil, err
	}
	l.net = n
	return n, nil
}

// netNow is the session's proxy session now, or nil.
func (l *live) netNow() *netSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.net
}

// networkOf is a session's policy: a live session's, else (ended) the
// one stored with it.
func (s *Service) networkOf(rec kiln.Session) kiln.NetworkPolicy {
	if l := s.lookup(rec.ID); l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.policy
	}
	return rec.Network.Normal()
}
