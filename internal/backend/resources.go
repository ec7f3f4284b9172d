package backend

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// MaxResources bounds how many extended resources one sandbox names.
const MaxResources = 16

// resourceName is an extended resource's name as Kubernetes takes it: a
// DNS subdomain prefix and a name (nvidia.com/gpu, example.com/fakegpu).
// Compiled at first use: its long counted repetitions took 0.7-1.3 ms
// to compile, in the init of every process of the kiln binary, which
// every sandbox stage is.
var resourceName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
})

// ParseResource reads an administrator's allowlist entry NAME or
// NAME=MAX (kiln serve --k8s-extended-resource): MAX is the most one
// sandbox may ask for, 0 (or none) for no bound beyond the nodes'.
func ParseResource(s string) (name string, max int64, err error) {
	name, m, hasMax := strings.Cut(s, "=")
	if !resourceName().MatchString(name) || strings.HasPrefix(name, "kubernetes.io/") || strings.Contains(name, ".kubernetes.io/") {
		return "", 0, kiln.Errorf(kiln.Invalid, "extended resource %q: want a name like nvidia.com/gpu (a domain, '/', a name; not in kubernetes.io), optionally =MAX", trunc(s))
	}
	if hasMax {
		if max, err = strconv.ParseInt(m, 10, 64); err != nil || max < 0 {
			return "", 0, kiln.Errorf(kiln.Invalid, "extended resource %s: the most a sandbox may ask for, %q, is not a whole number of 0 or more", name, trunc(m))
		}
	}
	return name, max, nil
}

// CheckResources checks what a sandbox asks for (name → count) against
// the administrator's allowlist (name → the most per sandbox, 0 for no
// bound). The error names what is allowed.
func CheckResources(asked, allowed map[string]int64) error {
	if len(asked) == 0 {
		return nil
	}
	if len(allowed) == 0 {
		return kiln.Errorf(kiln.Invalid, "this server allows no extended resources (GPUs); its administrator allows them with kiln serve --backend kubernetes --k8s-extended-resource NAME[=MAX]")
	}
	if len(asked) > MaxResources {
		return kiln.Errorf(kiln.Invalid, "a session may ask for at most %d extended resources, not %d", MaxResources, len(asked))
	}
	for _, name := range slices.Sorted(maps.Keys(asked)) {
		n := asked[name]
		max, ok := allowed[name]
		if !ok {
			return kiln.Errorf(kiln.Invalid, "extended resource %q is not allowed on this server; allowed: %s", trunc(name), describe(allowed))
		}
		if n < 1 || max > 0 && n > max {
			return kiln.Errorf(kiln.Invalid, "extended resource %s: %d is outside the allowed range 1 to %s", name, n, bound(max))
		}
	}
	return nil
}

// describe lists an allowlist: nvidia.com/gpu (at most 2), example.com/x.
func describe(allowed map[string]int64) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(allowed)) {
		if max := allowed[name]; max > 0 {
			name += fmt.Sprintf(" (at most %d)", max)
		}
		out = append(out, name)
	}
	return strings.Join(out, ", ")
}

func bound(max int64) string {
	if max == 0 {
		return "what a node has"
	}
	return strconv.FormatInt(max, 10)
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
