// Package lang is the registry of languages kiln runs (registry.go): how
// each is named, its kind, which host binary runs it, its file extensions,
// whether it runs one-shot, its version probe, and its kernel or its
// toolchain.
package lang

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/langdef"
)

// Language is one entry of the registry; the type is package langdef's,
// below both this registry and package programs, so that an entry can hold
// its toolchain (see docs/ARCHITECTURE.md, "Languages").
type Language = langdef.Language

// Kind says how a language keeps state between cells.
type Kind = langdef.Kind

// The kinds of language.
const (
	REPL    = langdef.REPL
	Program = langdef.Program
)

// All returns every language, sorted by name.
func All() []Language { return append([]Language(nil), table...) }

// Names returns the canonical names, sorted.
func Names() []string {
	var names []string
	for _, l := range table {
		names = append(names, l.Name)
	}
	sort.Strings(names)
	return names
}

// Lookup finds a language by name or alias, case-insensitively.
func Lookup(name string) (*Language, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for i := range table {
		l := &table[i]
		if l.Name == n {
			return l, nil
		}
		for _, a := range l.Aliases {
			if a == n {
				return l, nil
			}
		}
	}
	if n == "" {
		return nil, kiln.Errorf(kiln.Invalid, "no language given; supported languages: %s", strings.Join(Names(), ", "))
	}
	return nil, kiln.Errorf(kiln.Invalid, "unknown language %q; supported languages: %s", name, strings.Join(Names(), ", "))
}

// ByExt finds a language by a file name's extension: an exact match of
// any of its extensions first (main.C is C++), then one that ignores case.
func ByExt(file string) (*Language, error) {
	for _, fold := range []bool{false, true} {
		for i := range table {
			for _, ext := range table[i].Exts() {
				if strings.HasSuffix(file, ext) || fold && strings.HasSuffix(strings.ToLower(file), strings.ToLower(ext)) {
					return &table[i], nil
				}
			}
		}
	}
	return nil, kiln.Errorf(kiln.Invalid, "cannot tell the language of %q from its extension; give --lang (one of %s)", file, strings.Join(Names(), ", "))
}

// Info is what Detect found out about one language on this host.
type Info struct {
	Language
	Found   bool   // the runtime is installed
	Version string // what its version command printed (first line)
	Problem string // when not found: what is missing and what to install
}

// Detect reports every language, whether its runtime is installed on this
// host, and its version. The version commands run in parallel.
func Detect(ctx context.Context) []Info {
	all := All()
	out := make([]Info, len(all))
	var wg sync.WaitGroup
	for i := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &all[i]
			info := Info{Language: *l}
			if v, err := l.DetectVersion(ctx); err != nil {
				info.Problem = err.Error()
			} else {
				info.Found, info.Version = true, v
			}
			out[i] = info
		}()
	}
	wg.Wait()
	return out
}
