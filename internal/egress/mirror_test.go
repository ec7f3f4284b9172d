package egress

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeIndex is a local PEP 503 index and npm registry on 127.0.0.1, the
// administrator's upstream in these tests (admin upstreams may be on
// loopback).
type fakeIndex struct {
	srv      *httptest.Server
	files    map[string][]byte // path -> content
	down     atomic.Bool       // answer 503 to everything
	tamper   atomic.Bool       // serve other bytes than the index declares
	mu       sync.Mutex
	fileHits map[string]int
	metaHits int
}

func newFakeIndex(t *testing.T) *fakeIndex {
	f := &fakeIndex{files: map[string][]byte{
		"/files/demo_pkg-1.0-py3-none-any.whl": []byte("demo wheel bytes"),
		"/files/dep_one-2.0.tar.gz":            []byte("dep sdist bytes"),
		"/npm/left-pad/-/left-pad-1.3.0.tgz":   []byte("left-pad tarball"),
		"/npm/@kiln/thing/-/thing-0.1.0.tgz":   []byte("scoped tarball"),
	}, fileHits: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func sha256hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
func sri512(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(s[:])
}

func (f *fakeIndex) serve(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	p := r.URL.EscapedPath()
	if body, ok := f.files[r.URL.Path]; ok {
		f.mu.Lock()
		f.fileHits[r.URL.Path]++
		f.mu.Unlock()
		if f.tamper.Load() {
			body = []byte("evil bytes")
		}
		w.Write(body)
		return
	}
	f.mu.Lock()
	f.metaHits++
	f.mu.Unlock()
	switch p {
	case "/simple/demo-pkg/":
		whl := f.files["/files/demo_pkg-1.0-py3-none-any.whl"]
		fmt.Fprintf(w, `<!DOCTYPE html><html><head><base href="%s/files/"></head><body><h1>Links for demo-pkg</h1>
<a href="demo_pkg-1.0-py3-none-any.whl#sha256=%s" data-requires-python="&gt;=3.8" data-core-metadata="sha256=00">demo_pkg-1.0-py3-none-any.whl</a><br/>
<a href="javascript:alert(1)">bad</a>
</body></html>`, f.srv.URL, sha256hex(whl))
	case "/simple/dep-one/":
		fmt.Fprintf(w, `<html><body><a href="/files/dep_one-2.0.tar.gz#sha256=%s">dep_one-2.0.tar.gz</a></body></html>`, sha256hex(f.files["/files/dep_one-2.0.tar.gz"]))
	case "/npm/left-pad", "/npm/@kiln%2fthing":
		name, file := "left-pad", "/npm/left-pad/-/left-pad-1.3.0.tgz"
		if strings.Contains(p, "kiln") {
			name, file = "@kiln/thing", "/npm/@kiln/thing/-/thing-0.1.0.tgz"
		}
		doc := map[string]any{"name": name, "versions": map[string]any{"1.3.0": map[string]any{
			"name": name, "version": "1.3.0",
			"dist": map[string]any{"tarball": f.srv.URL + file, "integrity": sri512(f.files[file]), "shasum": "00"},
		}}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeIndex) hits(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fileHits[path]
}

// mirrorSetup is a proxy whose upstreams are the fake index.
func mirrorSetup(t *testing.T, cfg Config) (*fakeIndex, *Proxy, *Session, *recorder, string) {
	t.Helper()
	f := newFakeIndex(t)
	cfg.PyPIIndex = f.srv.URL + "/simple/"
	cfg.NPMRegistry = f.srv.URL + "/npm/"
	cfg.Resolver = &fakeResolver{}
	p := mustNew(t, cfg)
	rec := &recorder{}
	s := p.Open("s", Policy{Mode: ModeAllowlist}, rec.add)
	_, addr := serveSession(t, s)
	return f, p, s, rec, addr
}

// fetch GETs path from the proxy in origin form, as pip and npm do.
func fetch(t *testing.T, addr, path string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	req.Host = "127.0.0.1:3128" // as the client inside the sandbox sends it
	resp, err := http.DefaultTransport.(*http.Transport).Clone().RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Status, string(b)
}

var hrefRE = regexp.MustCompile(`href="([^"]+)"`)

func TestPyPIMirror(t *testing.T) {
	f, _, _, rec, addr := mirrorSetup(t, Config{})
	code, _, page := fetch(t, addr, "/pypi/simple/Demo_Pkg/")
	if code != 200 {
		t.Fatalf("project page = %d %q", code, page)
	}
	whl := f.files["/files/demo_pkg-1.0-py3-none-any.whl"]
	hrefs := hrefRE.FindAllStringSubmatch(page, -1)
	if len(hrefs) != 1 {
		t.Fatalf("page has links %v, want exactly the one http link (javascript: dropped):\n%s", hrefs, page)
	}
	link := hrefs[0][1]
	want := "/pypi/files/demo-pkg/sha256-" + sha256hex(whl) + "/"
	if !strings.HasPrefix(link, want) || !strings.HasSuffix(link, "/demo_pkg-1.0-py3-none-any.whl#sha256="+sha256hex(whl)) {
		t.Errorf("link = %q, want %s.../demo_pkg-1.0-py3-none-any.whl#sha256=<hash>", link, want)
	}
	if strings.Contains(page, "data-core-metadata") || strings.Contains(page, "<base") || !strings.Contains(page, `data-requires-python="&gt;=3.8"`) {
		t.Errorf("page attributes: want data-core-metadata and <base> gone, data-requires-python kept:\n%s", page)
	}
	code, _, body := fetch(t, addr, strings.Split(link, "#")[0])
	if code != 200 || body != string(whl) {
		t.Errorf("download = %d %q, want the wheel", code, body)
	}
	// A link the proxy did not sign is not fetched.
	forged := strings.Replace(link, "demo_pkg-1.0", "demo_pkg-6.6", 1)
	forged = regexp.MustCompile(`/[A-Za-z0-9_-]{24}/`).ReplaceAllString(strings.Split(forged, "#")[0], "/AAAAAAAAAAAAAAAAAAAAAAAA/")
	if code, _, _ := fetch(t, addr, forged); code != 404 {
		t.Errorf("forged link = %d, want 404", code)
	}
	recs := waitRecords(t, rec, 3) // page, download, forged
	if r := recs[0]; !r.Allowed || r.Kind != KindPyPI || r.Package != "demo-pkg" || r.Host != "127.0.0.1" || r.BytesDown != int64(len(page)) {
		t.Errorf("page record = %+v", r)
	}
	if r := recs[1]; !r.Allowed || r.BytesDown != int64(len(whl)) || r.Cached {
		t.Errorf("download record = %+v", r)
	}
	if r := recs[2]; r.Allowed || !strings.Contains(r.Reason, "did not write") {
		t.Errorf("forged record = %+v", r)
	}
	if code, _, _ := fetch(t, addr, "/pypi/simple/no-such/"); code != 404 {
		t.Errorf("unknown project = %d, want 404", code)
	}
}

func TestNPMMirror(t *testing.T) {
	f, _, _, rec, addr := mirrorSetup(t, Config{})
	for _, c := range []struct{ path, name, file string }{
		{"/npm/left-pad", "left-pad", "/npm/left-pad/-/left-pad-1.3.0.tgz"},
		{"/npm/@kiln%2fthing", "@kiln/thing", "/npm/@kiln/thing/-/thing-0.1.0.tgz"},
	} {
		code, _, body := fetch(t, addr, c.path)
		if code != 200 {
			t.Fatalf("GET %s = %d %s", c.path, code, body)
		}
		var doc struct {
			Name     string
			Versions map[string]struct {
				Dist struct{ Tarball, Integrity string }
			}
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		dist := doc.Versions["1.3.0"].Dist
		tgz := f.files[c.file]
		prefix := "http://127.0.0.1:3128/npm/-/files/"
		if doc.Name != c.name || !strings.HasPrefix(dist.Tarball, prefix) || dist.Integrity != sri512(tgz) {
			t.Fatalf("packument %s: name %q tarball %q integrity %q; want the tarball on the proxy's address as the client sent it", c.path, doc.Name, dist.Tarball, dist.Integrity)
		}
		code, _, got := fetch(t, addr, strings.TrimPrefix(dist.Tarball, "http://127.0.0.1:3128"))
		if code != 200 || got != string(tgz) {
			t.Errorf("tarball of %s = %d %q", c.name, code, got)
		}
	}
	recs := waitRecords(t, rec, 4)
	if len(recs) != 4 || recs[2].Package != "@kiln/thing" || recs[2].Kind != KindNPM || !recs[3].Allowed {
		t.Errorf("records = %+v", recs)
	}
}

// TestPackagePolicyOnMirrors: a package the policy refuses gets 403 naming
// the policy and the package, directly or as a dependency: pip and npm ask
// the mirror for each dependency's metadata, which is checked like the
// package asked for.
func TestPackagePolicyOnMirrors(t *testing.T) {
	_, _, _, rec, addr := mirrorSetup(t, Config{Packages: PackagePolicy{Allow: []string{"demo-pkg", "npm:left-pad"}, Deny: []string{"npm:@kiln/*"}}})
	if code, _, _ := fetch(t, addr, "/pypi/simple/demo-pkg/"); code != 200 {
		t.Fatalf("allowed project = %d", code)
	}
	// demo-pkg depends on dep-one; pip's next request is for its page.
	code, status, body := fetch(t, addr, "/pypi/simple/dep_one/")
	if code != 403 || !strings.Contains(status, `package "dep-one" is not on the administrator's package allowlist`) || !strings.Contains(body, "package policy") {
		t.Errorf("dependency not on the allowlist = %q %q, want 403 naming the policy and the package", status, body)
	}
	code, status, body = fetch(t, addr, "/npm/@kiln%2fthing")
	var e struct{ Error string }
	json.Unmarshal([]byte(body), &e)
	if code != 403 || !strings.Contains(e.Error, `package "@kiln/thing" is on the administrator's package denylist`) {
		t.Errorf("denied npm package = %q %q, want 403 with the reason in the JSON error npm shows", status, body)
	}
	if code, _, _ := fetch(t, addr, "/npm/left-pad"); code != 200 {
		t.Errorf("allowed npm package = %d", code)
	}
	recs := waitRecords(t, rec, 4)
	if len(recs) != 4 || recs[1].Allowed || recs[1].Kind != KindPyPI || recs[1].Package != "dep-one" || !strings.Contains(recs[1].Reason, "allowlist") ||
		recs[2].Allowed || recs[2].Kind != KindNPM || !strings.Contains(recs[2].Reason, "denylist") {
		t.Errorf("records = %+v", recs)
	}
}

// TestCacheServesWhileUpstreamDown: a second download of the same content
// comes from the cache without asking the upstream, and the page and the
// file are still served while the upstream is down.
func TestCacheServesWhileUpstreamDown(t *testing.T) {
	f, p, _, rec, addr := mirrorSetup(t, Config{CacheDir: t.TempDir()})
	_, _, page := fetch(t, addr, "/pypi/simple/demo-pkg/")
	link := strings.Split(hrefRE.FindStringSubmatch(page)[1], "#")[0]
	whlPath := "/files/demo_pkg-1.0-py3-none-any.whl"
	if code, _, body := fetch(t, addr, link); code != 200 || body != string(f.files[whlPath]) {
		t.Fatalf("first download = %d %q", code, body)
	}
	f.down.Store(true)
	p.mirrors.metaTTL = 0 // the page is stale now: served only because upstream fails
	code, _, page2 := fetch(t, addr, "/pypi/simple/demo-pkg/")
	if code != 200 || page2 != page {
		t.Errorf("page with upstream down = %d, want the stale cached page", code)
	}
	if code, _, body := fetch(t, addr, link); code != 200 || body != string(f.files[whlPath]) {
		t.Errorf("download with upstream down = %d %q, want the cached wheel", code, body)
	}
	if n := f.hits(whlPath); n != 1 {
		t.Errorf("upstream served the wheel %d times, want 1", n)
	}
	recs := waitRecords(t, rec, 4)
	if len(recs) != 4 || recs[1].Cached || !recs[2].Cached || !recs[3].Cached {
		t.Errorf("records = %+v, want the second page and download marked cached", recs)
	}
	// Content not in the cache fails with a message that says so.
	f.down.Store(false)
	_, _, npmDoc := fetch(t, addr, "/npm/left-pad")
	f.down.Store(true)
	tarball := regexp.MustCompile(`http://127.0.0.1:3128(/npm/-/files/[^"]+)`).FindStringSubmatch(npmDoc)[1]
	code, status, body := fetch(t, addr, tarball)
	if code != 502 || !strings.Contains(body, "not in the cache") {
		t.Errorf("uncached tarball with upstream down = %q %q, want 502 saying it is not cached", status, body)
	}
}

// TestCacheRefusesWrongHash: bytes that do not match the hash the index
// declares are neither served nor cached; a cached file damaged on disk is
// not served but fetched again.
func TestCacheRefusesWrongHash(t *testing.T) {
	dir := t.TempDir()
	f, _, _, rec, addr := mirrorSetup(t, Config{CacheDir: dir})
	_, _, page := fetch(t, addr, "/pypi/simple/demo-pkg/")
	link := strings.Split(hrefRE.FindStringSubmatch(page)[1], "#")[0]
	f.tamper.Store(true)
	code, status, body := fetch(t, addr, link)
	if code != 502 || !strings.Contains(status, "does not match the hash") || strings.Contains(body, "evil") {
		t.Errorf("tampered download = %q %q, want 502 refusing it", status, body)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "sha256")); len(entries) != 0 {
		t.Errorf("the cache kept %d files after a hash mismatch", len(entries))
	}
	if r := waitRecords(t, rec, 2)[1]; !strings.Contains(r.Reason, "does not match the hash") {
		t.Errorf("record = %+v, want the mismatch as its reason", r)
	}
	f.tamper.Store(false)
	whl := f.files["/files/demo_pkg-1.0-py3-none-any.whl"]
	if code, _, body := fetch(t, addr, link); code != 200 || body != string(whl) {
		t.Fatalf("good download = %d %q", code, body)
	}
	// Damage the cached copy: it must not be served, and is fetched again.
	os.WriteFile(filepath.Join(dir, "sha256", sha256hex(whl)), []byte("rotten"), 0o600)
	if code, _, body := fetch(t, addr, link); code != 200 || body != string(whl) {
		t.Errorf("after damage = %d %q, want the good wheel again", code, body)
	}
	if n := f.hits("/files/demo_pkg-1.0-py3-none-any.whl"); n != 3 {
		t.Errorf("upstream hits = %d, want 3 (tampered, good, after damage)", n)
	}
}

func TestBlobCacheLRU(t *testing.T) {
	dir := t.TempDir()
	c, err := openCache(dir, 25)
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(b []byte) contentKey { k, _ := parseKey("sha256-" + sha256hex(b)); return k }
	a, b, d := []byte("aaaaaaaaaa"), []byte("bbbbbbbbbb"), []byte("dddddddddd")
	for _, x := range [][]byte{a, b} {
		f, _, err := c.put(keyOf(x), strings.NewReader(string(x)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if f, _, ok := c.get(keyOf(a)); ok { // a is now the most recent
		f.Close()
	} else {
		t.Fatal("a not cached")
	}
	f, _, _ := c.put(keyOf(d), strings.NewReader(string(d)))
	f.Close()
	if _, _, ok := c.get(keyOf(b)); ok {
		t.Errorf("b, the least recently used, is still cached past the bound")
	}
	for _, x := range [][]byte{a, d} {
		if f, _, ok := c.get(keyOf(x)); !ok {
			t.Errorf("%s evicted, want it kept", x)
		} else {
			f.Close()
		}
	}
	if c.Size() > 25 {
		t.Errorf("size %d over the bound 25", c.Size())
	}
	// A restart sees what is there.
	c2, _ := openCache(dir, 25)
	if c2.Size() != 20 {
		t.Errorf("reopened size = %d, want 20", c2.Size())
	}
	// Keys are hashes only: nothing else names a file.
	for _, bad := range []string{"sha1-" + strings.Repeat("0", 40), "sha256-../../etc/passwd", "sha256-" + strings.Repeat("A", 64), "md5-00"} {
		if _, ok := parseKey(bad); ok {
			t.Errorf("parseKey(%q) accepted", bad)
		}
	}
}

func TestUpstreamHelpers(t *testing.T) {
	out := "global.index-url='http://global.example/simple'\ninstall.index-url='http://install.example/simple'\n"
	if got := pipIndexFromConfigList(out); got != "http://install.example/simple" {
		t.Errorf("pipIndexFromConfigList = %q, want the [install] value, which pip prefers", got)
	}
	if got := pipIndexFromConfigList("global.timeout='5'"); got != "" {
		t.Errorf("no index-url: %q", got)
	}
	b := []byte("x")
	s := sha512.Sum512(b)
	if got := npmKey(sri512(b) + " sha1-AAAA"); got != "sha512-"+hex.EncodeToString(s[:]) {
		t.Errorf("npmKey = %q", got)
	}
	if got := npmKey("sha1-AAAA"); got != "-" {
		t.Errorf("npmKey(sha1 only) = %q, want - (not cached by a weak hash)", got)
	}
	if _, err := New(Config{PyPIIndex: "ftp://x"}); err == nil {
		t.Errorf("New accepted an ftp index")
	}
}
