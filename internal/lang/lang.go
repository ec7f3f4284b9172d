// Package lang is the registry of languages kiln runs (registry.go): how
// each is named, its kind, which host binary runs it, its file extensions,
// whether it runs one-shot, its version probe and its kernel.
package lang

import (
	"context"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kernels"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// Kind says how a language keeps state between cells.
type Kind string

const (
	// REPL languages have a kernel that keeps state between cells.
	REPL Kind = "repl"
	// Program languages run each cell as a whole program (compiled first
	// where needed); the workspace is the state.
	Program Kind = "program"
)

// Language is one entry of the registry: everything kiln knows about a
// language. Adding a language is one entry in registry.go (plus its kernel
// source or its toolchain's build steps, and its tests); Check says what an
// entry lacks.
type Language struct {
	Name      string   // canonical name
	Aliases   []string // other names a user may type
	Kind      Kind
	Ext       string   // extension of a program file (main<Ext>), with the dot
	OtherExts []string // other extensions of its source files (case-sensitive, as the compiler reads them)
	Binary    string   // absolute path on the host; must lie in the sandbox's read-only root
	// RunsOneShot: kiln run runs a file of it directly, Binary Args file
	// (Argv), with no kernel and no build.
	RunsOneShot bool
	Args        []string // argv before the program file, for a one-shot run
	Env         []string // extra environment for its programs and its kernel
	Version     []string // argv that prints the version (run with Binary unless it starts with "/")
	Package     string   // what to install when Binary is missing
	// Kernel says how to start a REPL language's kernel. Program languages
	// have none: their toolchain (how to build and run them) is in package
	// programs, keyed by Name, because programs imports lang (see
	// docs/ARCHITECTURE.md, "Languages").
	Kernel func() kernels.Spec
}

// Argv is the command line that runs the program file.
func (l *Language) Argv(file string) []string {
	return append(append([]string{l.Binary}, l.Args...), file)
}

// Exts is every extension of the language's source files, Ext first.
func (l *Language) Exts() []string {
	return append([]string{l.Ext}, l.OtherExts...)
}

// OneShot reports whether a language can run a script file directly
// (Argv); the others need a kernel or a build.
func (l *Language) OneShot() bool { return l.RunsOneShot }

// KernelSpec is how to start the language's REPL kernel, and false for a
// language that has none.
func (l *Language) KernelSpec() (kernels.Spec, bool) {
	if l.Kernel == nil {
		return kernels.Spec{}, false
	}
	return l.Kernel(), true
}

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

// Available reports whether the runtime is installed, with an error that
// says what to install when it is not.
func (l *Language) Available() error {
	fi, err := os.Stat(l.Binary)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return kiln.Errorf(kiln.Unsupported, "the %s runtime is not installed on this host: %s is missing (install %s)", l.Name, l.Binary, l.Package)
	}
	return nil
}

// DetectVersion runs the runtime's version command on the host.
func (l *Language) DetectVersion(ctx context.Context) (string, error) {
	if err := l.Available(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	argv := append([]string{l.Binary}, l.Version...)
	if strings.HasPrefix(l.Version[0], "/") {
		argv = l.Version
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line, nil
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
