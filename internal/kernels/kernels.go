// Package kernels holds kiln's REPL kernels: small programs, one per
// language, that keep a session's state between cells and speak
// package kernelproto on fd 3. Their sources are embedded in the kiln binary
// and reach the language runtime through fd 3 (Spec.Boot: a short loader
// on the command line reads them), so nothing needs to be installed in the
// sandbox's read-only root and ps shows no pages of source.
//
// This package is host-side: it says how to start a kernel. The agent starts
// it inside the sandbox like any other user process.
package kernels

import "sort"

// Spec says how to start the REPL kernel of one language.
type Spec struct {
	Language string   // canonical name, as in package lang
	Argv     []string // absolute runtime path first, the source inline (see Boot); fd 3 is the channel
	Env      []string // extra KEY=VALUE
}

// registry maps a language to its kernel. Each kernel's file adds itself.
var registry = map[string]func() Spec{
	"python":     pythonKernel,
	"javascript": javascriptKernel,
	"typescript": typescriptKernel,
	"bash":       bashKernel,
	"sql":        sqlKernel,
}

// REPL returns the kernel of a language, and false for languages that have
// none (program languages run each cell as a whole program).
func REPL(language string) (Spec, bool) {
	f, ok := registry[language]
	if !ok {
		return Spec{}, false
	}
	return f(), true
}

// Languages lists the languages that have a REPL kernel, sorted.
func Languages() []string {
	var out []string
	for l := range registry {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}
