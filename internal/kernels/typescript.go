package kernels

// typescriptKernel type-checks each cell against the declarations of the
// cells before it, reports type errors (as errors named TSError, without
// running the cell), and runs the transpiled cell like the JavaScript
// kernel.
func typescriptKernel() Spec { return nodeSpec("typescript") }
