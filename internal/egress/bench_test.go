package egress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
)

// The proxy's cost: a download from a local server, directly and through
// a session (resolve with the fake resolver, check, dial, copy), in the
// same run. Each download is on a new connection both ways, as a proxied
// request always is upstream. Compare ns/op (latency) and MB/s.
//
//	go test -run '^$' -bench 'Direct|Proxy' -count 6 ./internal/egress

var benchSizes = []int{1 << 20, 100 << 20}

func benchOrigin(b *testing.B) *httptest.Server {
	chunk := make([]byte, 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchDownload(b *testing.B, c *http.Client, u string, size int) {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != int64(size) || resp.StatusCode != 200 {
			b.Fatalf("got %d bytes, status %d, err %v", n, resp.StatusCode, err)
		}
	}
}

func sizeName(n int) string { return fmt.Sprintf("%dMB", n>>20) }

func BenchmarkDirect(b *testing.B) {
	srv := benchOrigin(b)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			benchDownload(b, c, srv.URL+"/?n="+strconv.Itoa(size), size)
		})
	}
}

func BenchmarkProxy(b *testing.B) {
	srv := benchOrigin(b)
	fn := newFakeNet()
	fn.route("origin.example", "203.0.113.10", 80, hostOf(srv.URL))
	p := mustNew(b, Config{Resolver: fn.res, Dial: fn.dial, MaxBytes: 1 << 62})
	s := p.Open("bench", Policy{Mode: ModeAllowlist, Allow: []string{"origin.example"}}, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(l)
	b.Cleanup(func() { s.Close(); l.Close() })
	proxyURL, _ := url.Parse("http://" + l.Addr().String())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}}
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			benchDownload(b, c, "http://origin.example/?n="+strconv.Itoa(size), size)
		})
	}
}
