package main

import (
	"encoding/json"
	"net/http"
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

// setNetwork answers PUT /v1/sessions/{id}/network with the session and
// the policy sent.
func (f *fakeKiln) setNetwork(w http.ResponseWriter, r *http.Request, body []byte) {
	s := fakeSessions[0]
	if err := json.Unmarshal(body, &s.Network); err != nil {
		answer(w, 400, client.Problem{Status: 400, Code: "invalid", Detail: err.Error()})
		return
	}
	answer(w, 200, s)
}

// TestSessionNetworkCommand: kiln session network sends the policy and
// prints what the server set.
func TestSessionNetworkCommand(t *testing.T) {
	f := newFakeKiln(t)
	r := f.run(t, "", "session", "network", "--allow", "example.com", "--allow", "*.example.org", "s1")
	if r.code != 0 || r.stdout != "allowlist: example.com, *.example.org\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got, want := string(f.body("PUT /v1/sessions/s1/network")), `{"mode":"allowlist","allow":["example.com","*.example.org"]}`; got != want {
		t.Errorf("sent %s; want %s", got, want)
	}
	f = newFakeKiln(t)
	if r := f.run(t, "", "session", "network", "s1"); r.code != 0 || r.stdout != "none\n" || string(f.body("PUT /v1/sessions/s1/network")) != `{"mode":"none"}` {
		t.Errorf("no flags: exit %d, %q, sent %s; want none", r.code, r.stdout, f.body("PUT /v1/sessions/s1/network"))
	}
}
