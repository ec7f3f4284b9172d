package service_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/server/openapi/openapitest"
)

// checkedProxy puts a proxy in front of a kiln serve that checks every
// answer against the OpenAPI document (package openapitest), so the
// answers of a real server across restarts and under load are checked
// too; a mismatch fails the test. It returns the proxy's URL.
func checkedProxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := openapitest.New()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(spec.Handler(proxyTo(u)))
	t.Cleanup(func() {
		hs.Close()
		for _, e := range spec.Errors() {
			t.Errorf("the answer does not match /v1/openapi.json: %s", e)
		}
	})
	return hs.URL
}

// proxyTo is checkedProxy's reverse proxy, without the checks. It
// answers full duplex. Go's HTTP/1 server otherwise drains and closes a
// request's body when the handler starts its answer, while the proxy's
// transport may still be reading that body: after the declared length it
// reads once more to see the end. On a busy machine that read comes after
// kiln serve has begun an event stream (it has the whole body by then);
// it fails, the transport drops its connection to kiln serve, and the
// client sees the stream end without its final event (golang/go#40747).
func proxyTo(u *url.URL) http.Handler {
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1 // server-sent events pass at once
	// A server that is down looks down through the proxy too: the
	// connection drops, as it would without the proxy, instead of a 502.
	p.ErrorHandler = func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) }
	p.ErrorLog = log.New(io.Discard, "", 0) // a killed server cuts streams on purpose
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, "the checking proxy cannot answer while it forwards the request body: "+err.Error(), http.StatusInternalServerError)
			return
		}
		p.ServeHTTP(w, r)
	})
}

// TestProxyStreamsWhileTheBodyIsSent: the proxy of checkedProxy passes an
// event stream whole when the server begins it before the proxy has
// finished forwarding the request body, which is what a busy machine
// makes of kiln serve's streams. The client here holds the body back
// until the stream has begun, so that order is certain: a proxy that is
// not full duplex holds the stream until it has the body (its server
// drains the body the proxy is still forwarding), and never shows it.
func TestProxyStreamsWhileTheBodyIsSent(t *testing.T) {
	const (
		payload = `{"code":"print(42)"}`
		started = "event: started\ndata: {}\n\n"
	)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			t.Error(err)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, started)
		rc.Flush()
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("the server could not read the request body: %v", err)
			return
		}
		fmt.Fprintf(w, "event: done\ndata: %s\n\n", b)
	}))
	defer backend.Close()
	u, err := url.Parse(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(proxyTo(u))
	defer proxy.Close()

	ctx := ctxT(t, time.Minute)
	body, send := io.Pipe()
	defer send.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy.URL+"/v1/sessions/s/executions", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(payload))
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		answered <- answer{resp, err}
	}()
	var resp *http.Response
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatalf("the request through the proxy: %v", a.err)
		}
		resp = a.resp
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not begin through the proxy before the request body was sent: the proxy holds an answer until it has forwarded the whole request")
	}
	defer resp.Body.Close()
	first := make([]byte, len(started))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != started {
		t.Fatalf("the stream through the proxy began with %q (%v), want %q", first, err, started)
	}
	if _, err := io.WriteString(send, payload); err != nil {
		t.Fatal(err)
	}
	send.Close()
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the stream through the proxy ended with %v after %q", err, rest)
	}
	if want := "event: done\ndata: " + payload + "\n\n"; string(rest) != want {
		t.Errorf("the end of the stream through the proxy: %q, want %q", rest, want)
	}
}
