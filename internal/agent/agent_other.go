//go:build !linux

package agent

import (
	"fmt"
	"os"
)

// Main fails: sandboxes need Linux.
func Main() {
	fmt.Fprintln(os.Stderr, "kiln agent: sandboxes need Linux")
	os.Exit(1)
}
