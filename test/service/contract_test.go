package service_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

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
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1 // server-sent events pass at once
	// A server that is down looks down through the proxy too: the
	// connection drops, as it would without the proxy, instead of a 502.
	p.ErrorHandler = func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) }
	p.ErrorLog = log.New(io.Discard, "", 0) // a killed server cuts streams on purpose
	hs := httptest.NewServer(spec.Handler(p))
	t.Cleanup(func() {
		hs.Close()
		for _, e := range spec.Errors() {
			t.Errorf("the answer does not match /v1/openapi.json: %s", e)
		}
	})
	return hs.URL
}
