//go:build !linux

package spawn

import (
	"fmt"
	"os"
)

// Main fails: sandboxes need Linux.
func Main() {
	fmt.Fprintln(os.Stderr, "kiln spawn: sandboxes need Linux")
	os.Exit(ExitSetupFailed)
}

// RlimitArg is argv[1] of the rlimit stage (rlimit_linux.go).
const RlimitArg = "__kiln-rlimits"

// RlimitMain fails: sandboxes need Linux.
func RlimitMain() { Main() }
