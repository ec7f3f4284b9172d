package kernels

// typescriptKernel is a placeholder until the typescript kernel lands.
func typescriptKernel() Spec { return Spec{Language: "typescript"} }
