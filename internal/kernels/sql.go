package kernels

// sqlKernel is a placeholder until the sql kernel lands.
func sqlKernel() Spec { return Spec{Language: "sql"} }
