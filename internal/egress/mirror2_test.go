package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestMirrorLinksCarryNoCredentials: an index URL with a user and password
// works, and neither reaches the sandbox, not even inside a link.
func TestMirrorLinksCarryNoCredentials(t *testing.T) {
	content := []byte("private wheel")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "kiln" || p != "s3cret" {
			http.Error(w, "auth", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/simple/priv/":
			fmt.Fprintf(w, `<a href="../../files/priv-1.0-py3-none-any.whl#sha256=%s">priv</a>`, sha256hex(content))
		case "/files/priv-1.0-py3-none-any.whl":
			w.Write(content)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p := mustNew(t, Config{PyPIIndex: strings.Replace(srv.URL, "http://", "http://kiln:s3cret@", 1) + "/simple/"})
	var rec recorder
	_, addr := serveSession(t, p.Open("s", Policy{Mode: ModeAllowlist}, rec.add))
	code, _, page := fetch(t, addr, "/pypi/simple/priv/")
	if code != 200 {
		t.Fatalf("page = %d %s", code, page)
	}
	link := strings.Split(hrefRE.FindStringSubmatch(page)[1], "#")[0]
	target, _ := base64.RawURLEncoding.DecodeString(strings.Split(link, "/")[6])
	if strings.Contains(page, "s3cret") || strings.Contains(string(target), "s3cret") || strings.Contains(string(target), "kiln@") {
		t.Errorf("credentials reached the client: page %q, link target %q", page, target)
	}
	if code, _, body := fetch(t, addr, link); code != 200 || body != string(content) {
		t.Errorf("download = %d %q, want the file (credentials added back by the proxy)", code, body)
	}
	for _, r := range waitRecords(t, &rec, 2) {
		if strings.Contains(fmt.Sprint(r), "s3cret") {
			t.Errorf("a record holds the password: %+v", r)
		}
	}
}

// TestSetPolicyNoneCutsMirrorDownload: a download in progress stops when
// the session's policy becomes none.
func TestSetPolicyNoneCutsMirrorDownload(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/slow/":
			io.WriteString(w, `<a href="/files/slow-1.0.tar.gz">slow</a>`) // no hash: streamed
		case "/files/slow-1.0.tar.gz":
			w.Write(make([]byte, 1024))
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	p := mustNew(t, Config{PyPIIndex: srv.URL + "/simple/"})
	var rec recorder
	s := p.Open("s", Policy{Mode: ModeAllowlist}, rec.add)
	_, addr := serveSession(t, s)
	_, _, page := fetch(t, addr, "/pypi/simple/slow/")
	link := hrefRE.FindStringSubmatch(page)[1]
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n", link)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("download: %v %v", resp, err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	s.SetPolicy(None)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(resp.Body); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("the download went on after the policy became none: err %v", err)
	}
	recs := waitRecords(t, &rec, 2)
	if recs[1].Reason != "cut: the session's network policy changed" || recs[1].BytesDown != 1024 {
		t.Errorf("record = %+v, want cut by the policy change after 1024 bytes", recs[1])
	}
}

func TestDiscoverPyPIFromEnvironment(t *testing.T) {
	t.Setenv("PIP_INDEX_URL", "http://127.0.0.1:1/simple")
	u := &upstream{discover: discoverPyPI}
	got, err := u.get(context.Background())
	if err != nil || got != "http://127.0.0.1:1/simple/" {
		t.Errorf("discovered %q, %v; want PIP_INDEX_URL with a trailing slash", got, err)
	}
}

func TestForwardCountsUpload(t *testing.T) {
	_, _, rec, client := forwardSetup(t, Config{}, allowExample, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %d", len(b))
	}))
	resp, err := client.Post("http://allowed.example/up", "text/plain", strings.NewReader(strings.Repeat("u", 5000)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "got 5000" {
		t.Errorf("origin answered %q, want it to get the 5000-byte body", b)
	}
	if r := waitRecords(t, rec, 1)[0]; r.BytesUp != 5000 || r.BytesDown != int64(len(b)) {
		t.Errorf("record = %+v, want 5000 bytes up and %d down", r, len(b))
	}
}
