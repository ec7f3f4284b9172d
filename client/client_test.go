package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testKey = "kiln_test_0123456789"

// testServer serves h and returns a client of it with testKey.
func testServer(t *testing.T, h http.HandlerFunc, opts ...Option) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, testKey, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func TestNewRejects(t *testing.T) {
	for _, tt := range []struct{ url, key string }{
		{"", ""},
		{"127.0.0.1:8420", ""},
		{"ftp://example.com", ""},
		{"http://", ""},
		{"http://user:pw@example.com", ""},
		{"http://example.com/?q=1", ""},
		{"http://example.com/#f", ""},
		{"http://example.com", "two words"},
		{"http://example.com", "line\nbreak"},
	} {
		if _, err := New(tt.url, tt.key); err == nil {
			t.Errorf("New(%q, %q) = nil error; want one", tt.url, tt.key)
		}
	}
}

func TestRequestHeadersAndPrefix(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		writeJSON(w, 200, []Language{{Name: "python", Kind: "repl", Available: true}})
	}))
	defer srv.Close()
	// A path prefix (a reverse proxy's) with a trailing slash.
	c, err := New(srv.URL+"/kiln/", testKey, WithUserAgent("agent/1.0"))
	if err != nil {
		t.Fatal(err)
	}
	langs, err := c.Languages(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(langs) != 1 || langs[0].Name != "python" {
		t.Errorf("languages = %+v; want python", langs)
	}
	for _, c := range []struct{ what, got, want string }{
		{"method", got.Method, "GET"},
		{"path", got.URL.EscapedPath(), "/kiln/v1/languages"},
		{"Authorization", got.Header.Get("Authorization"), "Bearer " + testKey},
		{"User-Agent", got.Header.Get("User-Agent"), "agent/1.0"},
		{"Accept", got.Header.Get("Accept"), "application/json"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q; want %q", c.what, c.got, c.want)
		}
	}
}

func TestHealthSendsNoKey(t *testing.T) {
	for _, call := range []struct {
		path string
		fn   func(*Client, context.Context) error
	}{
		{"/v1/health/live", (*Client).Health},
		{"/v1/health/ready", (*Client).Ready},
	} {
		c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != call.path {
				t.Errorf("path %q; want %q", r.URL.Path, call.path)
			}
			if a := r.Header.Get("Authorization"); a != "" {
				t.Errorf("%s sent Authorization %q; the health routes need no key", call.path, a)
			}
			w.WriteHeader(200)
		})
		if err := call.fn(c, ctxT(t)); err != nil {
			t.Errorf("%s: %v", call.path, err)
		}
	}
}

// TestRedirectNotFollowed: a server that cleans "a/../b" into another path
// answers with a redirect; following it would run a different route.
func TestRedirectNotFollowed(t *testing.T) {
	followed := false
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/users/x" {
			followed = true
			return
		}
		http.Redirect(w, r, "/v1/users/x", http.StatusMovedPermanently)
	})
	err := c.DeleteFile(ctxT(t), "s1", "../../../users/x", false)
	if err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("DeleteFile answered by a redirect: err = %v; want a redirect error", err)
	}
	if followed {
		t.Error("the client followed the redirect")
	}
}

func TestBoundedAnswer(t *testing.T) {
	var v map[string]string
	err := decodeJSON(strings.NewReader(`{"id":"`+strings.Repeat("x", 100)+`"}`), 64, &v)
	if err == nil || !strings.Contains(err.Error(), "larger than 64 bytes") {
		t.Errorf("an answer over the bound: err = %v; want a size error", err)
	}
	if err := decodeJSON(strings.NewReader(`{"id":"x"}`), 64, &v); err != nil || v["id"] != "x" {
		t.Errorf("an answer within the bound: %v, %v", v, err)
	}
}

func TestContextCancels(t *testing.T) {
	c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Session(ctx, "s1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v; want context.DeadlineExceeded", err)
	}
}

func diff(t *testing.T, what string, got, want any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}
