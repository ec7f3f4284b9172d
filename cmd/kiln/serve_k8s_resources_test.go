package main

import (
	"flag"
	"io"
	"maps"
	"strings"
	"testing"
)

// --k8s-extended-resource builds the allowlist of extended resources,
// NAME or NAME=MAX, repeated; a bad or repeated one is refused naming it.
func TestExtendedResourceFlag(t *testing.T) {
	parse := func(args ...string) (kubernetesFlags, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var k kubernetesFlags
		addKubernetesFlags(fs, &k)
		return k, fs.Parse(args)
	}
	k, err := parse("--k8s-extended-resource", "nvidia.com/gpu=2", "--k8s-extended-resource", "example.com/fakegpu")
	if want := (resourceList{"nvidia.com/gpu": 2, "example.com/fakegpu": 0}); err != nil || !maps.Equal(k.extended, want) {
		t.Errorf("allowlist %v, %v; want %v", k.extended, err, want)
	}
	if got := k.extended.String(); got != "example.com/fakegpu,nvidia.com/gpu=2" {
		t.Errorf("String() = %q", got)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--k8s-extended-resource", "gpu"}, `extended resource "gpu": want a name like nvidia.com/gpu`},
		{[]string{"--k8s-extended-resource", "nvidia.com/gpu=-1"}, "not a whole number"},
		{[]string{"--k8s-extended-resource", "nvidia.com/gpu", "--k8s-extended-resource", "nvidia.com/gpu=1"}, "nvidia.com/gpu is given twice"},
	} {
		if _, err := parse(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want an error saying %q", c.args, err, c.want)
		}
	}
}

// The warm Pods of --k8s-warm-pods have the server's default limits, so
// that a session asking for nothing takes one.
func TestWarmPodsHaveDefaultLimits(t *testing.T) {
	f, err := parseServe([]string{"--backend", "kubernetes", "--k8s-warm-pods", "2", "--default-memory", "256M", "--default-cpus", "0.5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if l := f.k8s.warmLimits; f.k8s.warmPods != 2 || l.MemoryBytes != 256<<20 || l.CPUMillis != 500 || l != f.svc.DefaultLimits {
		t.Errorf("warm Pods: %d of %+v; want 2 of the default limits %+v", f.k8s.warmPods, l, f.svc.DefaultLimits)
	}
}
