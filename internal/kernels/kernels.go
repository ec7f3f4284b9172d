// Package kernels holds kiln's REPL kernels: small programs, one per
// language, that keep a session's state between cells and speak
// package kernelproto on fd 3. Their sources are embedded in the kiln binary
// and reach the language runtime through fd 3 (Spec.Boot: a short loader
// on the command line reads them), so nothing needs to be installed in the
// sandbox's read-only root and ps shows no pages of source.
//
// This package is host-side: it says how to start a kernel. The agent starts
// it inside the sandbox like any other user process. Which language has
// which kernel is said once, in package lang's registry (Language.Kernel
// holds these functions); this package does not import lang.
package kernels

// Spec says how to start the REPL kernel of one language.
type Spec struct {
	Language string   // canonical name, as in package lang
	Argv     []string // absolute runtime path first, the source inline (see Boot); fd 3 is the channel
	Env      []string // extra KEY=VALUE
}
