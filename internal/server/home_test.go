package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestHomePage: / answers a short plain page that says what the address
// serves and points at the API, not 404.
func TestHomePage(t *testing.T) {
	e := newEnv(t, options{})
	resp, err := http.Get(e.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET / = %d %s, want 200 text/plain:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	for _, want := range []string{"/v1/openapi.json", "no web UI", "Authorization: Bearer"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET / does not mention %q:\n%s", want, body)
		}
	}
	// Other paths outside the API still answer 404.
	resp, err = http.Get(e.url + "/nothing-here")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing-here = %d, want 404", resp.StatusCode)
	}
}
