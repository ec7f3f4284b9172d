package main

import (
	"strings"
	"testing"
)

func TestKeyCommands(t *testing.T) {
	f := newFakeKiln(t)
	f.goldenCases(t, []cliCase{
		{"key-create", "", []string{"key", "create", "--name", "ci"}},
		{"key-create-json", "", []string{"key", "create", "--user", "u1", "--json"}},
		{"key-create-expires", "", []string{"key", "create", "--expires", "24h", "--scope", "metrics", "--json"}},
		{"key-ls", "", []string{"key", "ls"}},
		{"key-revoke", "", []string{"key", "revoke", "k1", "--user", "u1"}},
		{"user-create", "", []string{"user", "create", "eve", "--admin"}},
		{"user-ls", "", []string{"user", "ls"}},
		{"user-get", "", []string{"user", "get"}},
	})
	want := []string{
		"POST /v1/users/me/keys",
		"POST /v1/users/u1/keys",
		"POST /v1/users/me/keys",
		"GET /v1/users/me/keys",
		"DELETE /v1/users/u1/keys/k1",
		"POST /v1/users",
		"GET /v1/users",
		"GET /v1/users/me",
	}
	got := f.sent()
	if len(got) != len(want) {
		t.Fatalf("requests %q; want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: %q; want %q", i, got[i], want[i])
		}
	}
	if b := string(f.body("POST /v1/users")); b != `{"name":"eve","admin":true}` {
		t.Errorf("user create sent %s", b)
	}
	if b := string(f.body("POST /v1/users/me/keys")); b != `{"expires_in_seconds":86400,"scope":"metrics"}` {
		t.Errorf("key create --expires 24h sent %s", b)
	}
	if r := f.run(t, "", "key", "create", "--expires", "-1h"); r.code != 125 || !strings.Contains(r.stderr, "--expires") {
		t.Errorf("--expires -1h: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestHistoryCommand(t *testing.T) {
	f := newFakeKiln(t)
	f.goldenCases(t, []cliCase{
		{"history", "", []string{"history", "s1"}},
		{"history-json", "", []string{"history", "--json", "s1"}},
	})
}
