package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A sandbox stage of the binary runs before the packages it does not use
// are initialized (internal/agent/stage): the rlimit stage, run as a
// sandbox runs it, initializes the agent's packages but not the server's,
// the service's or the stores'.
func TestSandboxStageSkipsServerInits(t *testing.T) {
	cmd := exec.Command(os.Args[0], "__kiln-rlimits", "1024", "1000000", "/bin/true")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the rlimit stage: %v\n%s", err, out)
	}
	inits := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			inits[f[1]] = true
		}
	}
	if !inits["github.com/kiln-dev/kiln/internal/agent"] {
		t.Fatalf("no init of internal/agent in the stage's trace:\n%s", out)
	}
	for _, pkg := range []string{"internal/service", "internal/server", "internal/store/sqlite", "internal/metrics", "internal/egress"} {
		if inits["github.com/kiln-dev/kiln/"+pkg] {
			t.Errorf("the sandbox stage initialized %s, which it does not use", pkg)
		}
	}
}
