package server

import (
	"go/build"
	"slices"
	"testing"
)

// TestServerDoesNotReachTheAgent: the HTTP server only decodes, calls the
// service and encodes. Driving the engine, talking to a sandbox's agent
// and knowing the agent's wire format or error codes are the service's
// job, so that every front end (HTTP, MCP, notebook, Jupyter) gets the
// same rules.
func TestServerDoesNotReachTheAgent(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{"github.com/kiln-dev/kiln/internal/agentclient", "github.com/kiln-dev/kiln/internal/protocol",
		"github.com/kiln-dev/kiln/internal/engine"} {
		if slices.Contains(pkg.Imports, banned) {
			t.Errorf("internal/server imports %s; go through internal/service instead", banned)
		}
	}
}
