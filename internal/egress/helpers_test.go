package egress

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
)

// fakeResolver answers from a table; a name with several answers gives
// them one after another, the last one repeating (DNS rebinding); one
// answer may hold several addresses, "a,b".
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]string
	calls   map[string]int
}

func (f *fakeResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	as := f.answers[host]
	if len(as) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	i := min(f.calls[host], len(as)-1)
	f.calls[host]++
	var out []net.IPAddr
	for _, a := range strings.Split(as[i], ",") {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

// recorder collects a session's records.
type recorder struct {
	mu   sync.Mutex
	recs []Record
}

func (r *recorder) add(rec Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

// all is the records so far in the order the attempts started (a record
// comes when its connection ends, which may be after the client has read
// the answer).
func (r *recorder) all() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	recs := append([]Record(nil), r.recs...)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Time.Before(recs[j].Time) })
	return recs
}

// serveSession serves s on a local TCP listener for the test and returns a
// client that uses it as its proxy, and its address.
func serveSession(t *testing.T, s *Session) (*http.Client, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	proxyURL, _ := url.Parse("http://" + l.Addr().String())
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, l.Addr().String()
}

func mustNew(t testing.TB, cfg Config) *Proxy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
