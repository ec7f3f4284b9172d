package kernels

// javascriptKernel is a placeholder until the javascript kernel lands.
func javascriptKernel() Spec { return Spec{Language: "javascript"} }
