package backend

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

func TestParseResource(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		max  int64
	}{{"nvidia.com/gpu", "nvidia.com/gpu", 0}, {"example.com/fakegpu=2", "example.com/fakegpu", 2}, {"amd.com/gpu=0", "amd.com/gpu", 0}} {
		name, max, err := ParseResource(c.in)
		if err != nil || name != c.name || max != c.max {
			t.Errorf("ParseResource(%q) = %q, %d, %v; want %q, %d", c.in, name, max, err, c.name, c.max)
		}
	}
	for _, bad := range []string{"", "gpu", "cpu", "nvidia.com/", "/gpu", "kubernetes.io/gpu", "node.kubernetes.io/x", "nvidia.com/gpu=-1", "nvidia.com/gpu=two", "Nvidia.com/gpu", "a.com/b c"} {
		if _, _, err := ParseResource(bad); kiln.KindOf(err) != kiln.Invalid {
			t.Errorf("ParseResource(%q): %v; want an invalid error", bad, err)
		}
	}
}

func TestCheckResources(t *testing.T) {
	allowed := map[string]int64{"nvidia.com/gpu": 2, "example.com/fakegpu": 0}
	for _, ok := range []map[string]int64{nil, {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 2, "example.com/fakegpu": 100}} {
		if err := CheckResources(ok, allowed); err != nil {
			t.Errorf("CheckResources(%v): %v", ok, err)
		}
	}
	for _, c := range []struct {
		asked   map[string]int64
		allowed map[string]int64
		want    string
	}{
		{map[string]int64{"nvidia.com/gpu": 1}, nil, "allows no extended resources"},
		{map[string]int64{"amd.com/gpu": 1}, allowed, `"amd.com/gpu" is not allowed on this server; allowed: example.com/fakegpu, nvidia.com/gpu (at most 2)`},
		{map[string]int64{"nvidia.com/gpu": 3}, allowed, "nvidia.com/gpu: 3 is outside the allowed range 1 to 2"},
		{map[string]int64{"nvidia.com/gpu": 0}, allowed, "0 is outside the allowed range"},
		{map[string]int64{"example.com/fakegpu": -1}, allowed, "-1 is outside the allowed range 1 to what a node has"},
	} {
		err := CheckResources(c.asked, c.allowed)
		if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckResources(%v, %v): %v; want an invalid error saying %q", c.asked, c.allowed, err, c.want)
		}
	}
}
