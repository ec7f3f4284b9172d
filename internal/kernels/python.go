package kernels

// pythonKernel is a placeholder until the python kernel lands.
func pythonKernel() Spec { return Spec{Language: "python"} }
