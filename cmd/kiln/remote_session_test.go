package main

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/client"
)

func TestSessionCommands(t *testing.T) {
	f := newFakeKiln(t)
	f.goldenCases(t, []cliCase{
		{"session-create", "", []string{"session", "create"}},
		{"session-create-json", "", []string{"session", "create", "--lang", "python", "--json"}},
		{"session-ls", "", []string{"session", "ls"}},
		{"session-ls-all", "", []string{"session", "ls", "--all"}},
		{"session-ls-all-and-status", "", []string{"session", "ls", "--all", "--status", "ended"}},
		{"session-ls-active", "", []string{"session", "ls", "--status", "active", "--meta", "conv=42"}},
		{"session-ls-none", "", []string{"session", "ls", "--meta", "conv=0"}},
		{"session-ls-json", "", []string{"session", "ls", "--status", "ended", "--json"}},
		{"session-get", "", []string{"session", "get", "s1"}},
		{"session-rm", "", []string{"session", "rm", "s1"}},
		{"session-rm-unknown", "", []string{"session", "rm", "s1", "s9"}},
		{"session-interrupt", "", []string{"session", "interrupt", "s1"}},
		{"session-restart", "", []string{"session", "restart", "s1", "--lang", "python"}},
	})
}

// TestSessionCreateRequest checks what session create sends.
func TestSessionCreateRequest(t *testing.T) {
	f := newFakeKiln(t)
	r := f.run(t, "", "session", "create", "--lang", "python", "--lang", "bash", "--memory", "256M", "--timeout", "1500us",
		"--cpus", "0.5", "--pids", "64", "--output", "64K", "--ttl", "90m", "--meta", "conv=42", "--meta", "who=a=b")
	if r.code != 0 || r.stdout != "s-new\n" || r.stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var got client.SessionRequest
	if err := json.Unmarshal(f.body("POST /v1/sessions"), &got); err != nil {
		t.Fatal(err)
	}
	want := client.SessionRequest{
		Languages:      []string{"python", "bash"},
		Limits:         client.Limits{TimeoutMS: 2, MemoryBytes: 256 << 20, CPUMillis: 500, Pids: 64, OutputBytes: 64 << 10},
		IdleTTLSeconds: 5400,
		Metadata:       map[string]string{"conv": "42", "who": "a=b"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("request (-want +got):\n%s", d)
	}
}

func TestSessionRequestsSent(t *testing.T) {
	f := newFakeKiln(t)
	f.run(t, "", "session", "ls", "--status", "ended")
	f.run(t, "", "session", "ls")
	f.run(t, "", "session", "ls", "--all")
	f.run(t, "", "session", "restart", "s1")
	f.run(t, "", "session", "rm", "s1")
	want := []string{
		"GET /v1/sessions?status=ended",
		"GET /v1/sessions?status=active", // active ones by default
		"GET /v1/sessions",
		"GET /v1/sessions?cursor=1", // the fake pages one session at a time
		"POST /v1/sessions/s1/restart",
		"DELETE /v1/sessions/s1",
	}
	if d := cmp.Diff(want, f.sent()); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
}
