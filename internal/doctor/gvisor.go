package doctor

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/kiln-dev/kiln/internal/backend/docker"
)

// gvisorReport says whether gVisor's runsc is installed, whether the
// engine has it registered, and whether a container actually runs under
// it here; when one does not, the attempt's own error says why. Every
// registered runtime whose name starts with runsc (scripts/gvisor
// registers runsc, on the systrap platform, and runsc-ptrace) is tried.
func gvisorReport(ctx context.Context, w io.Writer, e docker.Engine) {
	var names []string
	for _, r := range e.Runtimes {
		if strings.HasPrefix(r, "runsc") {
			names = append(names, r)
		}
	}
	if len(names) == 0 {
		where := "not installed"
		if p, err := exec.LookPath("runsc"); err == nil {
			where = "installed at " + p + " but"
		}
		fmt.Fprintf(w, "  absent   gVisor (runsc): %s not registered with this engine (scripts/gvisor builds and registers it); containers run under runc\n", where)
		return
	}
	for _, name := range names {
		path := e.RuntimePaths[name]
		if path == "" {
			path = name
		}
		if _, err := os.Stat(path); err != nil && strings.Contains(path, "/") {
			fmt.Fprintf(w, "  FAILS    gVisor (%s): registered with this engine, but its binary is missing: %v\n", name, err)
			continue
		}
		kernel, err := docker.TryRuntime(ctx, name)
		if err != nil {
			fmt.Fprintf(w, "  FAILS    gVisor (%s): registered (%s), but a container does not run under it here: %v\n", name, path, err)
			continue
		}
		fmt.Fprintf(w, "  ok       gVisor (%s): registered (%s); a container runs under it here (its kernel: %s); kiln serve --backend docker --docker-runtime %s\n", name, path, kernel, name)
	}
}
