package agent

import (
	"os"

	"github.com/kiln-dev/kiln/internal/agent/spawn"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Dispatch runs the sandbox stage named by argv[1], if any, and then never
// returns. Every binary that creates sandboxes calls it first thing in main
// (or TestMain), because sandboxes re-execute the binary itself.
func Dispatch() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case protocol.BootArg:
		Main()
	case spawn.Arg:
		spawn.Main()
	case spawn.RlimitArg, spawn.RlimitConfineArg:
		spawn.RlimitMain()
	}
}
