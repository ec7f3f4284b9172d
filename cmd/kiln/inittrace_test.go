package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Every sandbox stage (boot, agent, each spawned process) runs this binary
// from its start, so every package's init runs there too, before main
// dispatches the stage. None of kiln's own packages may do heavy work at
// init (compile dozens of expressions, resolve schemas): it makes every
// sandbox slower to start and every agent bigger. Allocation at init is
// counted by the runtime (GODEBUG=inittrace=1), so this does not depend
// on the machine's speed or load.
func TestSandboxStagesInitIsLight(t *testing.T) {
	const most = 256 << 10 // bytes one package may allocate at init
	cmd := exec.Command(kilnBin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kiln version: %v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(string(out), "\n") {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(line)
		if len(f) < 10 || f[0] != "init" || f[8] != "bytes," || !strings.HasPrefix(f[1], "github.com/kiln-dev/kiln/") {
			continue
		}
		seen++
		b, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("cannot read the bytes of %q: %v", line, err)
		}
		if b > most {
			t.Errorf("package %s allocates %d KiB at init (most %d KiB): make that work lazy (sync.OnceValue), every sandbox process pays it", f[1], b>>10, most>>10)
		}
	}
	if seen == 0 {
		t.Fatalf("no init trace of kiln's packages in the output:\n%s", out)
	}
}
