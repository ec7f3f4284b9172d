package egress

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

func TestPolicyValidate(t *testing.T) {
	good := []Policy{
		{},
		{Mode: "none"},
		{Mode: "allowlist"},
		{Mode: "allowlist", Allow: []string{"example.com", "*.example.org", "api.example.net:8443", "Example.COM.", "a_b.example.com"}},
	}
	for _, p := range good {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", p, err)
		}
	}
	bad := []struct {
		p    Policy
		want string // in the message
	}{
		{Policy{Mode: "open"}, `unknown mode "open"`},
		{Policy{Mode: "none", Allow: []string{"example.com"}}, "takes no allow list"},
		{Policy{Mode: "allowlist", Allow: []string{""}}, "empty"},
		{Policy{Mode: "allowlist", Allow: []string{"http://example.com"}}, "not a host name"},
		{Policy{Mode: "allowlist", Allow: []string{"example.com/path"}}, "not a host name"},
		{Policy{Mode: "allowlist", Allow: []string{"10.0.0.1"}}, "IP addresses are not allowed"},
		{Policy{Mode: "allowlist", Allow: []string{"[::1]:443"}}, "IP addresses are not allowed"},
		{Policy{Mode: "allowlist", Allow: []string{"example.com:0"}}, "bad port"},
		{Policy{Mode: "allowlist", Allow: []string{"example.com:70000"}}, "bad port"},
		{Policy{Mode: "allowlist", Allow: []string{"*"}}, "the host name has the character '*'"},
		{Policy{Mode: "allowlist", Allow: []string{"*.com"}}, "whole top-level domain"},
		{Policy{Mode: "allowlist", Allow: []string{"a.*.example.com"}}, "character '*'"},
		{Policy{Mode: "allowlist", Allow: []string{"-a.example.com"}}, "starts or ends with '-'"},
		{Policy{Mode: "allowlist", Allow: make([]string, MaxAllowEntries+1)}, "more than the 256 allowed"},
	}
	for _, c := range bad {
		err := c.p.Validate()
		if err == nil {
			t.Errorf("Validate(%+v) = nil, want an error with %q", c.p, c.want)
			continue
		}
		if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v (%s), want kind invalid with %q", c.p, err, kiln.KindOf(err), c.want)
		}
	}
}

func TestPolicyMatching(t *testing.T) {
	p := Policy{Mode: "allowlist", Allow: []string{"example.com", "*.example.org", "api.example.net:8443"}}
	es, err := p.entries()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host string
		port int
		want bool
	}{
		{"example.com", 443, true},
		{"example.com", 80, true},
		{"example.com", 8080, false},
		{"www.example.com", 443, false},
		{"a.example.org", 443, true},
		{"a.b.example.org", 80, true},
		{"example.org", 443, false}, // "*." is subdomains only
		{"badexample.org", 443, false},
		{"api.example.net", 8443, true},
		{"api.example.net", 443, false},
		{"example.com.evil.net", 443, false},
	}
	for _, c := range cases {
		if got := allows(es, c.host, c.port); got != c.want {
			t.Errorf("allows(%s:%d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
}

func TestPolicyWithin(t *testing.T) {
	ceiling := Policy{Mode: "allowlist", Allow: []string{"*.example.com", "example.org", "api.example.net:8443", "both.example.net:80", "both.example.net:443"}}
	within := []Policy{
		{},
		{Mode: "none"},
		{Mode: "allowlist"},
		{Mode: "allowlist", Allow: []string{"a.example.com", "*.a.example.com", "*.example.com", "example.org:443", "api.example.net:8443", "both.example.net"}},
	}
	for _, p := range within {
		if err := p.Within(ceiling); err != nil {
			t.Errorf("%+v.Within(ceiling) = %v, want nil", p, err)
		}
	}
	outside := []Policy{
		{Mode: "allowlist", Allow: []string{"example.com"}},      // "*." does not cover the apex
		{Mode: "allowlist", Allow: []string{"example.org:8080"}}, // port
		{Mode: "allowlist", Allow: []string{"*.example.org"}},    // wider than the exact name
		{Mode: "allowlist", Allow: []string{"api.example.net"}},  // 80 and 443, ceiling has 8443 only
		{Mode: "allowlist", Allow: []string{"other.net"}},
	}
	for _, p := range outside {
		err := p.Within(ceiling)
		if err == nil || kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(err.Error(), "ceiling") {
			t.Errorf("%+v.Within(ceiling) = %v, want a forbidden error naming the ceiling", p, err)
		}
	}
	if err := (Policy{Mode: "allowlist"}).Within(None); kiln.KindOf(err) != kiln.Forbidden {
		t.Errorf("allowlist within a none ceiling = %v, want forbidden", err)
	}
	if err := (Policy{Mode: "bogus"}).Within(ceiling); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("invalid policy within ceiling = %v, want invalid", err)
	}
}

func TestPackagePolicy(t *testing.T) {
	pp := PackagePolicy{Allow: []string{"scikit-learn", "npm:left-pad", "npm:@types/*"}, Deny: []string{"pypi:evil"}}
	cases := []struct {
		eco, name string
		want      string // substring of the reason, "" allowed
	}{
		{ecoPyPI, "Scikit_Learn", ""},
		{ecoPyPI, "scikit.learn", ""},
		{ecoPyPI, "numpy", "not on the administrator's package allowlist"},
		{ecoPyPI, "evil", "denylist"},
		{ecoNPM, "left-pad", ""},
		{ecoNPM, "@types/node", ""},
		{ecoNPM, "@typesx/node", "allowlist"},
		{ecoNPM, "scikit-learn", ""}, // unprefixed names apply to both
	}
	for _, c := range cases {
		got := pp.check(c.eco, c.name)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("check(%s, %s) = %q, want %q", c.eco, c.name, got, c.want)
		}
	}
	if err := (PackagePolicy{Allow: []string{"bad name"}}).Validate(); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("Validate of a bad name = %v, want invalid", err)
	}
	if err := (PackagePolicy{Allow: DefaultDataPackages}).Validate(); err != nil {
		t.Errorf("DefaultDataPackages: %v", err)
	}
}
