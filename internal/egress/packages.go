package egress

import (
	"regexp"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// PackagePolicy is the administrator's package policy for the mirrors. It
// is checked on every project (pip) or package (npm) whose metadata a
// client asks for. pip and npm fetch the metadata of every dependency
// through the mirror before they can download it, and downloads are only
// reachable through links the mirror itself wrote for an allowed name, so
// transitive dependencies are checked the same way as direct ones.
//
// A name applies to both ecosystems; "pypi:name" or "npm:name" applies to
// one. pip names are compared normalised (PEP 503: case folded, runs of
// '-', '_' and '.' as one '-'); npm names are compared case-folded, and
// "@scope/*" matches a whole scope.
type PackagePolicy struct {
	Allow []string `json:"allow,omitempty"` // if non-empty, only these names (in both ecosystems)
	Deny  []string `json:"deny,omitempty"`  // never these names
}

// DefaultDataPackages is a sensible allowlist for data work: the common
// scientific Python stack, requests, and their usual dependencies. It is
// not used unless an administrator puts it into PackagePolicy.Allow. As an
// Allow list closes both ecosystems, an administrator who uses it and npm
// adds the npm names wanted.
var DefaultDataPackages = []string{
	// numpy, scipy, pandas and their dependencies
	"numpy", "scipy", "pandas", "python-dateutil", "pytz", "tzdata", "six",
	// scikit-learn
	"scikit-learn", "joblib", "threadpoolctl",
	// matplotlib, seaborn
	"matplotlib", "seaborn", "contourpy", "cycler", "fonttools", "kiwisolver",
	"packaging", "pillow", "pyparsing",
	// requests
	"requests", "urllib3", "certifi", "charset-normalizer", "idna",
	// build back ends pip may fetch for an sdist
	"setuptools", "wheel",
}

// Ecosystems of the mirrors.
const (
	ecoPyPI = "pypi"
	ecoNPM  = "npm"
)

var pep503Runs = regexp.MustCompile(`[-_.]+`)

// NormalizePyPI is a pip project name normalised per PEP 503.
func NormalizePyPI(name string) string {
	return strings.ToLower(pep503Runs.ReplaceAllString(name, "-"))
}

// normalize is name as compared in eco.
func normalize(eco, name string) string {
	if eco == ecoPyPI {
		return NormalizePyPI(name)
	}
	return strings.ToLower(name)
}

// Validate says what is wrong with the policy's names.
func (pp PackagePolicy) Validate() error {
	for _, list := range [][]string{pp.Allow, pp.Deny} {
		for _, n := range list {
			_, name := splitEco(n)
			if name == "" || len(name) > 214 || strings.ContainsAny(name, " \t\r\n\"'<>\\") {
				return kiln.Errorf(kiln.Invalid, "package policy: %q is not a package name; use a name, \"pypi:name\", \"npm:name\" or \"npm:@scope/*\"", n)
			}
		}
	}
	return nil
}

// splitEco splits an optional "pypi:" or "npm:" prefix.
func splitEco(s string) (eco, name string) {
	for _, e := range []string{ecoPyPI, ecoNPM} {
		if rest, ok := strings.CutPrefix(s, e+":"); ok {
			return e, rest
		}
	}
	return "", s
}

// matches says whether one policy entry names name in eco.
func matches(eco, name, ent string) bool {
	e, n := splitEco(ent)
	if e != "" && e != eco {
		return false
	}
	if scope, ok := strings.CutSuffix(n, "/*"); ok && eco == ecoNPM {
		return strings.HasPrefix(strings.ToLower(name), strings.ToLower(scope)+"/")
	}
	return normalize(eco, n) == normalize(eco, name)
}

// check returns why name may not be fetched in eco, or "".
func (pp PackagePolicy) check(eco, name string) string {
	if slices.ContainsFunc(pp.Deny, func(ent string) bool { return matches(eco, name, ent) }) {
		return "package " + quote(name) + " is on the administrator's package denylist"
	}
	if len(pp.Allow) > 0 && !slices.ContainsFunc(pp.Allow, func(ent string) bool { return matches(eco, name, ent) }) {
		return "package " + quote(name) + " is not on the administrator's package allowlist"
	}
	return ""
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
