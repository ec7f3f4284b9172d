package kernels

import _ "embed"

// The bash kernel is a Python driver (bash/driver.py) that speaks
// kernelproto and runs every cell in one long-lived interactive bash, set up
// by bash/init.bash. The driver's doc comment and init.bash's header say
// what persists, how interrupts, exit and set -e are handled, and what a
// cell reports.
var (
	//go:embed bash/driver.py
	bashDriver string
	//go:embed bash/init.bash
	bashInit string
)

// Bash runs the driver with -I (isolated: a workspace file named like
// a standard module cannot replace it) and -S (no site, a faster start).
func Bash() Spec {
	return Spec{
		Language: "bash",
		Argv:     []string{"/usr/bin/python3", "-I", "-S", "-c", bashDriver, bashInit},
	}
}
