//go:build !linux

package boot

import (
	"fmt"
	"os"
)

const (
	AgentArg = "__kiln-agent"
	AgentEnv = "KILN_AGENT_CONFIG"
)

// Main fails: sandboxes need Linux.
func Main() {
	fmt.Fprintln(os.Stderr, "kiln boot: sandboxes need Linux")
	os.Exit(1)
}
