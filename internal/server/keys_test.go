package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/server"
)

// TestRateLimitPerUser: a user's keys share one budget, so minting keys
// buys no more requests.
func TestRateLimitPerUser(t *testing.T) {
	e := newEnv(t, options{http: server.Config{RatePerSecond: 0.01, RateBurst: 5}})
	ctx := ctxT(t)
	u, err := e.admin.CreateUser(ctx, client.UserRequest{Name: "dave"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := 0; i < 3; i++ {
		k, err := e.admin.CreateKey(ctx, u.ID, "k")
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.Secret)
	}
	// 5 requests spread over 3 keys (2, 2, 1) fit the burst; the sixth,
	// on a key that made only 2, does not.
	for i := 0; i < 5; i++ {
		if resp, p := raw(t, "GET", e.url+"/v1/sessions", keys[i%3], "", ""); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %+v", i+1, resp.StatusCode, p)
		}
	}
	resp, p := raw(t, "GET", e.url+"/v1/sessions", keys[2], "", "")
	if resp.StatusCode != 429 || p.Code != "rate_limited" || resp.Header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "user") {
		t.Errorf("sixth request of the user on its third key: %d %+v, Retry-After %q; want 429 rate_limited for the user",
			resp.StatusCode, p, resp.Header.Get("Retry-After"))
	}
	// Another user is not affected.
	if _, err := e.admin.ListSessions(ctx, client.ListOptions{}); err != nil {
		t.Errorf("the admin is limited by dave's requests: %v", err)
	}
}

// TestAuthFailuresPerAddress: guessing keys is refused with 429 and
// Retry-After once an address has failed too often; requests without a
// key do not count.
func TestAuthFailuresPerAddress(t *testing.T) {
	e := newEnv(t, options{http: server.Config{AuthFailuresPerMinute: 1, AuthFailureBurst: 3}})
	for i := 0; i < 5; i++ {
		if resp, _ := raw(t, "GET", e.url+"/v1/sessions", "", "", ""); resp.StatusCode != 401 {
			t.Fatalf("no key: %d, want 401", resp.StatusCode)
		}
	}
	for i := 0; i < 3; i++ {
		if resp, p := raw(t, "GET", e.url+"/v1/sessions", "kiln_guess", "", ""); resp.StatusCode != 401 {
			t.Fatalf("wrong key %d: %d %+v, want 401", i+1, resp.StatusCode, p)
		}
	}
	resp, p := raw(t, "GET", e.url+"/v1/sessions", "kiln_guess", "", "")
	if resp.StatusCode != 429 || p.Code != "rate_limited" || resp.Header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "failed authentications") {
		t.Fatalf("fourth wrong key: %d %+v, Retry-After %q; want 429 with Retry-After", resp.StatusCode, p, resp.Header.Get("Retry-After"))
	}
	// While refused, the address does not get to try a key at all.
	if resp, _ := raw(t, "GET", e.url+"/v1/sessions", e.key, "", ""); resp.StatusCode != 429 {
		t.Errorf("a right key from the refused address: %d, want 429", resp.StatusCode)
	}
}

// TestKeyExpiry: a key made to expire works until then, and afterwards
// answers 401 saying that it expired.
func TestKeyExpiry(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	k, err := e.admin.CreateKeyWith(ctx, "me", client.KeyRequest{Name: "short", ExpiresInSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if k.Expires == nil || time.Until(*k.Expires) > 2*time.Second {
		t.Fatalf("key expires %v, want within a second", k.Expires)
	}
	if resp, p := raw(t, "GET", e.url+"/v1/sessions", k.Secret, "", ""); resp.StatusCode != 200 {
		t.Fatalf("the key before it expires: %d %+v", resp.StatusCode, p)
	}
	time.Sleep(time.Until(*k.Expires) + 100*time.Millisecond)
	resp, p := raw(t, "GET", e.url+"/v1/sessions", k.Secret, "", "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(p.Detail, "expired") {
		t.Errorf("the key after it expired: %d %+v, want 401 saying it expired", resp.StatusCode, p)
	}
	keys, err := e.admin.Keys(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	var listed bool
	for _, l := range keys {
		listed = listed || (l.ID == k.ID && l.Expires != nil && l.Expires.Equal(*k.Expires))
	}
	if !listed {
		t.Errorf("keys = %+v, want %s with its expiry", keys, k.ID)
	}

	past := time.Now().Add(-time.Hour)
	_, err = e.admin.CreateKeyWith(ctx, "me", client.KeyRequest{ExpiresAt: &past})
	if p := wantProblem(t, "expires_at in the past", err, 400, "invalid"); !strings.Contains(p.Detail, "not in the future") {
		t.Errorf("detail %q", p.Detail)
	}
	future := time.Now().Add(time.Hour)
	_, err = e.admin.CreateKeyWith(ctx, "me", client.KeyRequest{ExpiresAt: &future, ExpiresInSeconds: 60})
	wantProblem(t, "both expiries", err, 400, "invalid")
	k2, err := e.admin.CreateKeyWith(ctx, "me", client.KeyRequest{ExpiresAt: &future})
	if err != nil || k2.Expires == nil || !k2.Expires.Equal(future.UTC().Truncate(time.Microsecond)) && k2.Expires.Sub(future).Abs() > time.Millisecond {
		t.Errorf("expires_at: %+v, %v; want it to expire at %v", k2, err, future)
	}
}

// TestMetricsKeyScope: a key with scope metrics reads the metrics and
// nothing else, so Prometheus holds no key that can make users.
func TestMetricsKeyScope(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	k, err := e.admin.CreateKeyWith(ctx, "me", client.KeyRequest{Name: "prometheus", Scope: "metrics"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Scope != "metrics" {
		t.Errorf("key scope %q, want metrics", k.Scope)
	}
	if resp, p := raw(t, "GET", e.url+"/metrics", k.Secret, "", ""); resp.StatusCode != 200 {
		t.Errorf("GET /metrics with a metrics key: %d %+v", resp.StatusCode, p)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/sessions", ""},
		{"GET", "/v1/users", ""},
		{"POST", "/v1/users", `{"name":"mallory","admin":true}`},
		{"POST", "/v1/users/me/keys", `{}`},
	} {
		resp, p := raw(t, tc.method, e.url+tc.path, k.Secret, "application/json", tc.body)
		if resp.StatusCode != 403 || p.Code != "forbidden" || !strings.Contains(p.Detail, "only read GET /metrics") {
			t.Errorf("%s %s with a metrics key: %d %+v, want 403", tc.method, tc.path, resp.StatusCode, p)
		}
	}
	u, err := e.admin.CreateUser(ctx, client.UserRequest{Name: "nonadmin"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.admin.CreateKeyWith(ctx, u.ID, client.KeyRequest{Scope: "metrics"})
	wantProblem(t, "a metrics key for a non-admin", err, 400, "invalid")
	_, err = e.admin.CreateKeyWith(ctx, "me", client.KeyRequest{Scope: "root"})
	wantProblem(t, "an unknown scope", err, 400, "invalid")
}
