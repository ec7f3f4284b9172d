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

// RlimitArg and RlimitConfineArg are argv[1] of the rlimit stage
// (rlimit_linux.go).
const (
	RlimitArg        = "__kiln-rlimits"
	RlimitConfineArg = "__kiln-rlimits-confine"
)

// RlimitMain fails: sandboxes need Linux.
func RlimitMain() { Main() }
