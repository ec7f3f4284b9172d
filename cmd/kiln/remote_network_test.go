package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/client"
)

// TestSessionCreateNetwork: --allow sends an allowlist policy, --network
// none sends none, nothing sends no policy (the server's default, none),
// and --allow with --network none is refused before any request.
func TestSessionCreateNetwork(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want *client.NetworkPolicy
	}{
		{nil, nil},
		{[]string{"--allow", "example.com", "--allow", "*.example.org:8443"}, &client.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.com", "*.example.org:8443"}}},
		{[]string{"--network", "none"}, &client.NetworkPolicy{Mode: "none"}},
		{[]string{"--network", "allowlist"}, &client.NetworkPolicy{Mode: "allowlist"}},
	} {
		f := newFakeKiln(t)
		r := f.run(t, "", append([]string{"session", "create"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d, %q", tc.args, r.code, r.stderr)
		}
		var got client.SessionRequest
		if err := json.Unmarshal(f.body("POST /v1/sessions"), &got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got.Network); d != "" {
			t.Errorf("%q: network (-want +got):\n%s", tc.args, d)
		}
	}
	f := newFakeKiln(t)
	r := f.run(t, "", "session", "create", "--network", "none", "--allow", "example.com")
	if r.code == 0 || !strings.Contains(r.stderr, "--allow goes with --network allowlist") || len(f.sent()) != 0 {
		t.Errorf("--network none --allow: exit %d, %q, sent %q; want a refusal and no request", r.code, r.stderr, f.sent())
	}
}
