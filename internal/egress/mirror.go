package egress

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Bounds and timings of the mirrors.
const (
	maxMetaBody      = 64 << 20         // one index page or packument
	metaCacheBytes   = 128 << 20        // all cached metadata together
	defaultMetaTTL   = 5 * time.Minute  // metadata served without asking upstream
	metaStaleMax     = 24 * time.Hour   // metadata served when upstream fails
	metaFetchTimeout = 30 * time.Second // one metadata fetch
	fileHeaderWait   = 30 * time.Second // a download's response head
)

// mirrors serves the package mirrors of all sessions: the upstreams, the
// metadata cache and the download cache are shared.
type mirrors struct {
	p       *Proxy
	client  *http.Client
	pypi    *upstream
	npm     *upstream
	meta    *metaCache
	cache   *blobCache // nil: no download cache
	metaTTL time.Duration
}

func newMirrors(p *Proxy) (*mirrors, error) {
	m := &mirrors{
		p:       p,
		pypi:    &upstream{discover: discoverPyPI},
		npm:     &upstream{discover: discoverNPM},
		meta:    &metaCache{entries: map[string]*metaEntry{}},
		metaTTL: defaultMetaTTL,
		client: &http.Client{Transport: &http.Transport{
			// The host's own proxy settings, as pip and npm on the host
			// would use them.
			Proxy:                 http.ProxyFromEnvironment,
			ResponseHeaderTimeout: fileHeaderWait,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   8,
			ForceAttemptHTTP2:     true,
		}},
	}
	var err error
	for _, u := range []struct {
		raw string
		up  *upstream
	}{{p.cfg.PyPIIndex, m.pypi}, {p.cfg.NPMRegistry, m.npm}} {
		if u.raw != "" {
			if u.up.fixed, err = checkUpstream(u.raw); err != nil {
				return nil, err
			}
		}
	}
	if p.cfg.CacheDir != "" {
		if m.cache, err = openCache(p.cfg.CacheDir, p.cfg.CacheBytes); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// gate applies the session's network policy, its byte budget and the
// package policy to a mirror request. On refusal it answers, records and
// returns false.
func (m *mirrors) gate(s *Session, w http.ResponseWriter, r *http.Request, rec *Record, eco, name string) bool {
	refuseRec := func(code int, msg, reason string) bool {
		rec.Reason = reason
		s.record(*rec)
		if eco == ecoPyPI && strings.HasPrefix(r.URL.Path, "/pypi/simple/") && strings.HasPrefix(r.UserAgent(), "pip/") {
			refusePip(w, msg)
		} else {
			writeRefusal(w, code, msg, eco == ecoNPM)
		}
		return false
	}
	if s.pol.Load().IsNone() {
		return refuseRec(http.StatusForbidden, noneMessage, "network policy is none")
	}
	if r := s.overBytes(); r != nil {
		return refuseRec(r.code, r.msg, r.reason)
	}
	if why := m.p.cfg.Packages.check(eco, name); why != "" {
		return refuseRec(http.StatusForbidden, "kiln: refused by the package policy: "+why+" (a dependency is checked the same way as a package asked for by name)", why)
	}
	return true
}

// refusePip refuses an index page to pip in the one way pip shows: pip
// logs an index page's HTTP error only with -v and then says just "No
// matching distribution found", but it warns, naming the Content-Type,
// about a page whose Content-Type it does not read. So pip gets a 200 that
// it skips, with the refusal as its Content-Type:
//
//	WARNING: Skipping page .../pypi/simple/x/ because the GET request got
//	Content-Type: kiln: this session's network policy is "none"; ...
//
// The record says refused; other clients get the plain 403.
func refusePip(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", reasonPhrase(strings.TrimSuffix(msg, ".")))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, msg+"\n")
}

// setUpstream fills the record's host and port from an upstream URL.
func setUpstream(rec *Record, raw string) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return
	}
	rec.Host = u.Hostname()
	rec.Port, _ = strconv.Atoi(u.Port())
	if rec.Port == 0 {
		rec.Port = map[string]int{"http": 80, "https": 443}[u.Scheme]
	}
}

var pipName = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9._-]{0,198}[a-z0-9])?$`)

// servePyPI serves /pypi/simple/<project>/ and /pypi/files/...
func (m *mirrors) servePyPI(s *Session, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		refuse(w, http.StatusMethodNotAllowed, "kiln: the pip mirror answers GET only")
		return
	}
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/pypi/")
	switch {
	case strings.HasPrefix(rest, "simple/"):
		project, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(rest, "simple/"), "/"))
		if err != nil || !pipName.MatchString(project) {
			refuse(w, http.StatusNotFound, "kiln: the pip mirror serves /pypi/simple/<project>/ for a valid project name (PEP 508), not %q", truncate(rest, 100))
			return
		}
		m.pypiPage(s, w, r, NormalizePyPI(project))
	case strings.HasPrefix(rest, "files/"):
		m.serveFile(s, w, r, ecoPyPI, strings.TrimPrefix(rest, "files/"))
	default:
		refuse(w, http.StatusNotFound, "kiln: the pip mirror serves /pypi/simple/<project>/ only")
	}
}

// pypiPage serves one project's PEP 503 page with its links rewritten.
func (m *mirrors) pypiPage(s *Session, w http.ResponseWriter, r *http.Request, project string) {
	rec := &Record{Time: time.Now(), Kind: KindPyPI, Package: project}
	setUpstream(rec, m.pypi.fixed)
	if !m.gate(s, w, r, rec, ecoPyPI, project) {
		return
	}
	base, err := m.pypi.get(r.Context())
	if err != nil {
		m.fail(s, w, rec, false, http.StatusBadGateway, "kiln: the pip mirror has no index: "+kiln.Message(err))
		return
	}
	pageURL := base + url.PathEscape(project) + "/"
	setUpstream(rec, pageURL)
	e, cached, err := m.fetchMeta(r.Context(), pageURL, "text/html")
	rec.Cached = cached
	switch {
	case err != nil:
		m.fail(s, w, rec, false, http.StatusBadGateway, fmt.Sprintf("kiln: the pip index at %s is unreachable and project %q is not cached: %v", rec.Host, project, err))
		return
	case e.status == http.StatusNotFound:
		m.fail(s, w, rec, false, http.StatusNotFound, fmt.Sprintf("kiln: pip project %q is not on the index", project))
		return
	case e.status != http.StatusOK:
		m.fail(s, w, rec, false, http.StatusBadGateway, fmt.Sprintf("kiln: the pip index answered %d for project %q", e.status, project))
		return
	}
	out, err := rewritePyPI(e.body, pageURL, project, m.p.sign)
	if err != nil {
		m.fail(s, w, rec, false, http.StatusBadGateway, fmt.Sprintf("kiln: the pip index's page for %q cannot be read: %v", project, err))
		return
	}
	m.serveBytes(s, w, r, rec, "text/html; charset=utf-8", out)
}

// fail records an allowed request that failed and answers it.
func (m *mirrors) fail(s *Session, w http.ResponseWriter, rec *Record, asJSON bool, code int, msg string) {
	rec.Allowed = true
	rec.Reason = strings.TrimPrefix(msg, "kiln: ")
	s.record(*rec)
	writeRefusal(w, code, msg, asJSON)
}

// serveBytes answers with body, counted against the session.
func (m *mirrors) serveBytes(s *Session, w http.ResponseWriter, r *http.Request, rec *Record, ctype string, body []byte) {
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Cache-Control", "no-store")
	m.serveStream(s, w, r, rec, bytes.NewReader(body))
}

// serveStream copies src to the client, counted against the session's
// budget, and records the request when done. Headers are set by the caller.
func (m *mirrors) serveStream(s *Session, w http.ResponseWriter, r *http.Request, rec *Record, src io.Reader) {
	rec.Allowed = true
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		s.record(*rec)
		return
	}
	// A download can be long: SetPolicy("none") and Close cut it by
	// closing its source.
	t := &tunnel{kind: rec.Kind, host: rec.Host, port: rec.Port}
	if c, ok := src.(io.Closer); ok {
		t.closer = c
		if s.track(t) {
			defer s.untrack(t)
		} else {
			c.Close()
		}
	}
	mt := &meter{r: src, s: s}
	err := copyFlush(w, mt)
	rec.BytesDown = mt.n
	if err != nil {
		rec.Reason = endReason(t, err)
		if rec.Reason == "" {
			rec.Reason = "transfer failed: " + err.Error()
		}
	}
	s.record(*rec)
	if err != nil {
		panic(http.ErrAbortHandler) // the client must see a cut, not an end
	}
}

// sign makes the signature of a download link, so the mirrors fetch only
// URLs they wrote themselves for an allowed package (never one a client
// made up: that would be an open proxy to wherever the index can reach).
func (p *Proxy) sign(parts ...string) string {
	mac := hmac.New(sha256.New, p.key)
	for _, s := range parts {
		mac.Write([]byte(s))
		mac.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:18])
}

// downloadLink is the path, under prefix, of a download the proxy will
// fetch: name/key/sig/url/filename, every part one path segment, signed
// with sign.
func downloadLink(sign func(...string) string, prefix, eco, name, key, target string) string {
	u, _ := url.Parse(target)
	file := "download"
	if u != nil && path.Base(u.Path) != "/" && path.Base(u.Path) != "." {
		file = path.Base(u.Path)
	}
	return prefix + url.PathEscape(name) + "/" + key + "/" + sign(eco, name, key, target) + "/" +
		base64.RawURLEncoding.EncodeToString([]byte(target)) + "/" + url.PathEscape(file)
}

// serveFile serves a download link the mirror wrote: from the cache when
// it holds the content the link names by hash, else from the upstream
// (verified against that hash and kept, when the cache is on).
func (m *mirrors) serveFile(s *Session, w http.ResponseWriter, r *http.Request, eco, rest string) {
	kind := map[string]string{ecoPyPI: KindPyPI, ecoNPM: KindNPM}[eco]
	asJSON := eco == ecoNPM
	parts := strings.Split(rest, "/")
	var name, target string
	ok := len(parts) == 5
	if ok {
		var err1, err2 error
		var raw []byte
		name, err1 = url.PathUnescape(parts[0])
		raw, err2 = base64.RawURLEncoding.DecodeString(parts[3])
		target = string(raw)
		ok = err1 == nil && err2 == nil &&
			hmac.Equal([]byte(parts[2]), []byte(m.p.sign(eco, name, parts[1], target)))
	}
	if !ok {
		rec := Record{Time: time.Now(), Kind: kind, Reason: "a download link the proxy did not write"}
		s.record(rec)
		writeRefusal(w, http.StatusNotFound, "kiln: this download link was not written by this proxy; fetch the package's index page through the mirror first", asJSON)
		return
	}
	rec := &Record{Time: time.Now(), Kind: kind, Package: name}
	setUpstream(rec, target)
	if !m.gate(s, w, r, rec, eco, name) {
		return
	}
	key, hasKey := parseKey(parts[1])
	if m.cache != nil && hasKey {
		if f, n, hit := m.cache.get(key); hit {
			defer f.Close()
			rec.Cached = true
			m.serveFile1(s, w, r, rec, f, n)
			return
		}
	}
	resp, err := m.fetchFile(r.Context(), target)
	if err != nil {
		msg := fmt.Sprintf("kiln: cannot download %s from %s: %v", path.Base(parts[4]), rec.Host, err)
		if m.cache != nil && hasKey {
			msg += " (and it is not in the cache)"
		}
		m.fail(s, w, rec, asJSON, http.StatusBadGateway, msg)
		return
	}
	defer resp.Body.Close()
	if m.cache == nil || !hasKey {
		w.Header().Set("Content-Type", "application/octet-stream")
		if resp.ContentLength >= 0 {
			w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		}
		m.serveStream(s, w, r, rec, resp.Body)
		return
	}
	f, n, err := m.cache.put(key, resp.Body)
	if err != nil {
		msg := fmt.Sprintf("kiln: cannot download %s from %s: %v", path.Base(parts[4]), rec.Host, err)
		if errors.Is(err, errHashMismatch) {
			msg = fmt.Sprintf("kiln: refused %s: %v (%s); nothing was served or cached", path.Base(parts[4]), errHashMismatch, key.alg)
		}
		m.fail(s, w, rec, asJSON, http.StatusBadGateway, msg)
		return
	}
	defer f.Close()
	m.serveFile1(s, w, r, rec, f, n)
}

func (m *mirrors) serveFile1(s *Session, w http.ResponseWriter, r *http.Request, rec *Record, f *os.File, n int64) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	m.serveStream(s, w, r, rec, f)
}

// fetchFile starts a download from the upstream.
func (m *mirrors) fetchFile(ctx context.Context, target string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	m.addCredentials(ctx, req)
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, errors.Unwrap(err) // without the URL, which may hold credentials
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("the index answered %s", resp.Status)
	}
	return resp, nil
}

// addCredentials gives a download the user and password of the upstream
// it comes from. Links never carry them (rewrite strips them), so the
// sandbox never sees them.
func (m *mirrors) addCredentials(ctx context.Context, req *http.Request) {
	for _, up := range []*upstream{m.pypi, m.npm} {
		base, err := up.get(ctx)
		if err != nil {
			continue
		}
		if u, err := url.Parse(base); err == nil && u.User != nil && u.Host == req.URL.Host {
			req.URL.User = u.User
			return
		}
	}
}

// metaEntry is one cached metadata answer.
type metaEntry struct {
	status int
	body   []byte
	at     time.Time
}

// metaCache keeps index pages and packuments for a short time, and for
// longer to serve when the upstream fails. It is bounded in bytes.
type metaCache struct {
	mu      sync.Mutex
	entries map[string]*metaEntry
	size    int
}

func (c *metaCache) get(key string) *metaEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key]
}

func (c *metaCache) put(key string, e *metaEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[key]; old != nil {
		c.size -= len(old.body)
	}
	c.entries[key] = e
	c.size += len(e.body)
	for c.size > metaCacheBytes {
		var oldest string
		for k, v := range c.entries {
			if oldest == "" || v.at.Before(c.entries[oldest].at) {
				oldest = k
			}
		}
		c.size -= len(c.entries[oldest].body)
		delete(c.entries, oldest)
	}
}

// fetchMeta gets metadata: from the cache while fresh, else from the
// upstream, else (the upstream failing) from the cache while not too old.
func (m *mirrors) fetchMeta(ctx context.Context, target, accept string) (*metaEntry, bool, error) {
	key := accept + " " + target
	old := m.meta.get(key)
	if old != nil && time.Since(old.at) < m.metaTTL {
		return old, true, nil
	}
	e, err := m.fetchMetaUpstream(ctx, target, accept)
	if err != nil {
		if old != nil && time.Since(old.at) < metaStaleMax {
			return old, true, nil
		}
		return nil, false, err
	}
	if e.status == http.StatusOK {
		m.meta.put(key, e)
	}
	return e, false, nil
}

func (m *mirrors) fetchMetaUpstream(ctx context.Context, target, accept string) (*metaEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, metaFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		return nil, fmt.Errorf("the index answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetaBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxMetaBody {
		return nil, fmt.Errorf("the index's answer is larger than %s", kiln.FormatBytes(maxMetaBody))
	}
	return &metaEntry{status: resp.StatusCode, body: body, at: time.Now()}, nil
}

// validHost is a Host header the npm mirror may write into tarball URLs.
var validHost = regexp.MustCompile(`^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)

// npmName is an npm package name, optionally scoped.
var npmName = regexp.MustCompile(`^(@[A-Za-z0-9][A-Za-z0-9._~-]*/)?[A-Za-z0-9._~-][A-Za-z0-9._~-]*$`)

// serveNPM serves /npm/<name> (packuments) and /npm/-/files/... (tarballs).
func (m *mirrors) serveNPM(s *Session, w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/npm/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeRefusal(w, http.StatusMethodNotAllowed, "kiln: the npm mirror answers GET only (no publish, audit or login)", true)
		return
	}
	if f, ok := strings.CutPrefix(rest, "-/files/"); ok {
		m.serveFile(s, w, r, ecoNPM, f)
		return
	}
	name, err := url.PathUnescape(rest)
	if err != nil || strings.HasPrefix(rest, "-/") || len(name) > 214 || !npmName.MatchString(name) {
		writeRefusal(w, http.StatusNotFound, fmt.Sprintf("kiln: the npm mirror serves /npm/<package> and the tarballs it links, not %q", truncate(rest, 100)), true)
		return
	}
	if !validHost.MatchString(r.Host) {
		writeRefusal(w, http.StatusBadRequest, "kiln: the request's Host header is not a host and port", true)
		return
	}
	rec := &Record{Time: time.Now(), Kind: KindNPM, Package: name}
	setUpstream(rec, m.npm.fixed)
	if !m.gate(s, w, r, rec, ecoNPM, name) {
		return
	}
	base, err := m.npm.get(r.Context())
	if err != nil {
		m.fail(s, w, rec, true, http.StatusBadGateway, "kiln: the npm mirror has no registry: "+kiln.Message(err))
		return
	}
	target := base + strings.Replace(url.PathEscape(name), "%2F", "%2f", 1)
	setUpstream(rec, target)
	accept := "application/json"
	if strings.Contains(r.Header.Get("Accept"), "application/vnd.npm.install-v1+json") {
		accept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8"
	}
	e, cached, err := m.fetchMeta(r.Context(), target, accept)
	rec.Cached = cached
	switch {
	case err != nil:
		m.fail(s, w, rec, true, http.StatusBadGateway, fmt.Sprintf("kiln: the npm registry at %s is unreachable and package %q is not cached: %v", rec.Host, name, err))
		return
	case e.status == http.StatusNotFound:
		m.fail(s, w, rec, true, http.StatusNotFound, fmt.Sprintf("kiln: npm package %q is not on the registry", name))
		return
	case e.status != http.StatusOK:
		m.fail(s, w, rec, true, http.StatusBadGateway, fmt.Sprintf("kiln: the npm registry answered %d for package %q", e.status, name))
		return
	}
	out, err := rewriteNPM(e.body, "http://"+r.Host+"/npm/-/files/", name, m.p.sign)
	if err != nil {
		m.fail(s, w, rec, true, http.StatusBadGateway, fmt.Sprintf("kiln: the npm registry's document for %q cannot be read: %v", name, err))
		return
	}
	m.serveBytes(s, w, r, rec, "application/json", out)
}
