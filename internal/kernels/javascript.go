package kernels

import _ "embed"

// nodeKernel is the JavaScript and TypeScript kernel. It travels on node's
// command line (-e), so the sandbox needs nothing but the node binary and,
// for TypeScript, the compiler. KILN_KERNEL_LANG picks the language.
//
//go:embed node/kernel.js
var nodeKernel string

const (
	// nodeBinary runs both kernels.
	nodeBinary = "/usr/bin/node"
	// typescriptDir is the TypeScript compiler's package. The JavaScript
	// kernel uses its parser too, loaded on the first cell that declares
	// something (let, const, class) or awaits at the top level.
	typescriptDir = "/usr/local/lib/node_modules/typescript"
)

// nodeSpec is the kernel on node for one language.
func nodeSpec(language string) Spec {
	return Spec{
		Language: language,
		Argv:     []string{nodeBinary, "-e", nodeKernel},
		Env:      []string{"KILN_KERNEL_LANG=" + language, "KILN_TYPESCRIPT=" + typescriptDir},
	}
}

// javascriptKernel runs JavaScript cells on Node.js, keeping top-level
// declarations between cells and allowing top-level await.
func javascriptKernel() Spec { return nodeSpec("javascript") }
