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
