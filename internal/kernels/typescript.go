package kernels

// TypeScript type-checks each cell against the declarations of the
// cells before it (strict mode; Node's globals typed loosely, every module
// as any), reports all its type errors as one error named TSError, with
// line:col into the cell, without running it, and runs the transpiled cell
// like the JavaScript kernel.
func TypeScript() Spec { return nodeSpec("typescript") }
