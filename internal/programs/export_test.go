package programs

import "github.com/kiln-dev/kiln/internal/langdef"

// registry finds a language by name: package lang's Lookup, which these
// internal tests cannot import (lang imports programs for its entries'
// toolchains). registry_test.go, an external test of this package linked
// into the same binary, sets it before any test runs.
var registry func(name string) (*langdef.Language, error)

// SetRegistry is registry_test.go's way in.
func SetRegistry(lookup func(string) (*langdef.Language, error)) { registry = lookup }

// lng is the registry's entry for name.
func lng(name string) *langdef.Language {
	if registry == nil {
		panic("programs tests: the registry is not set (registry_test.go)")
	}
	l, err := registry(name)
	if err != nil {
		panic(err)
	}
	return l
}
