package kernels

// bashKernel is a placeholder until the bash kernel lands.
func bashKernel() Spec { return Spec{Language: "bash"} }
