package main

import (
	"strings"

	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// addEgressAllow adds the comma-separated hosts of one --egress-allow to
// the server's network ceiling, which becomes an allowlist.
func addEgressAllow(ceiling *kiln.NetworkPolicy, v string) error {
	var hosts []string
	for _, h := range strings.Split(v, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return kiln.Errorf(kiln.Invalid, "no host given; name hosts such as example.com or *.example.com, comma-separated")
	}
	next := kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: append(append([]string{}, ceiling.Allow...), hosts...)}
	if err := (egress.Policy{Mode: next.Mode, Allow: next.Allow}).Validate(); err != nil {
		return err
	}
	*ceiling = next
	return nil
}
