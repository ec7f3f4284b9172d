package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestServeEgressAllow: --egress-allow (or "egress-allow" in --config)
// sets the network ceiling; none leaves it "none"; a bad host is refused
// with what is allowed.
func TestServeEgressAllow(t *testing.T) {
	f, err := parseServe(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.svc.NetworkCeiling.Mode != "" || len(f.svc.NetworkCeiling.Allow) != 0 {
		t.Errorf("default ceiling %+v; want none", f.svc.NetworkCeiling)
	}
	f, err = parseServe([]string{"--egress-allow", "example.com, *.example.org", "--egress-allow", "api.example.net:8443"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"example.com", "*.example.org", "api.example.net:8443"}; f.svc.NetworkCeiling.Mode != "allowlist" || !slices.Equal(f.svc.NetworkCeiling.Allow, want) {
		t.Errorf("ceiling %+v; want allowlist %q", f.svc.NetworkCeiling, want)
	}
	cfg := filepath.Join(t.TempDir(), "kiln.json")
	os.WriteFile(cfg, []byte(`{"egress-allow": "example.com,*.example.org"}`), 0o600)
	if f, err = parseServe([]string{"--config", cfg}, io.Discard); err != nil || len(f.svc.NetworkCeiling.Allow) != 2 {
		t.Errorf("from --config: %+v, %v; want two hosts", f, err)
	}
	var stderr strings.Builder
	if _, err := parseServe([]string{"--egress-allow", "http://example.com/x"}, &stderr); err == nil || !strings.Contains(stderr.String(), "not a host name") {
		t.Errorf("a URL as a host: %v, %q; want it refused naming the allowed forms", err, stderr.String())
	}
}
