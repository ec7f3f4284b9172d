package kernels

import _ "embed"

// nodeKernel is the JavaScript and TypeScript kernel, inline as node's -e
// program (Spec.Boot moves it to fd 3), so the sandbox needs nothing but
// the node binary and, for TypeScript, the compiler. KILN_KERNEL_LANG
// picks the language.
//
//go:embed node/kernel.js
var nodeKernel string

const (
	// nodeBinary runs both kernels.
	nodeBinary = "/usr/bin/node"
	// typescriptDir is the TypeScript compiler's package. The JavaScript
	// kernel uses its parser too, loaded on the first cell with top-level
	// await, import or export; without it those cells run less well.
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

// JavaScript runs JavaScript cells on Node.js. Top-level
// declarations persist between cells and may be declared again, top-level
// await works, and display() and its helpers (display.html, .markdown,
// .svg, .png, .json, .mime, .text) send rich output. A cell's stdin is
// process.stdin (readline works on it, open stdin included); fs.readSync(0)
// sees an empty stdin. See node/kernel.js.
func JavaScript() Spec { return nodeSpec("javascript") }
