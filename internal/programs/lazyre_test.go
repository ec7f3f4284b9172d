package programs

import "testing"

// Every expression compiles (they are compiled on first use, so a bad one
// would otherwise fail only the run that needs it).
func TestLazyRegexpsCompile(t *testing.T) {
	if len(allRegexps) < 40 {
		t.Fatalf("%d lazy expressions registered; the package has more than 40", len(allRegexps))
	}
	for _, l := range allRegexps {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%q does not compile: %v", l.src, r)
				}
			}()
			l.get()
		}()
	}
}
