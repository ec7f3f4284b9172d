package docker

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/backendtest"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// gvisorBackend is testBackend with every container under gVisor's
// runsc. Without runsc registered it skips and says so (in CI, where
// scripts/gvisor registers it, a skip fails the run); registered but not
// running a container here, it fails with the attempt's own error, the
// one kiln doctor prints.
func gvisorBackend(t *testing.T) *Backend {
	t.Helper()
	b := testBackend(t)
	ctx := context.Background()
	if e := Probe(ctx); !slices.Contains(e.Runtimes, "runsc") {
		t.Skipf("gVisor: runsc is not registered with this engine (runtimes %v); scripts/gvisor builds and registers it", e.Runtimes)
	}
	kernel, err := TryRuntime(ctx, "runsc")
	if err != nil {
		t.Fatalf("gVisor: runsc is registered but does not run a container here: %v", err)
	}
	if !strings.Contains(kernel, "gvisor") {
		t.Fatalf("gVisor: a container under runsc reports the kernel %q; want gVisor's", kernel)
	}
	if err := b.SetRuntime(ctx, "runsc"); err != nil {
		t.Fatal(err)
	}
	return b
}

// The conformance suite, its security half included, with every sandbox
// under gVisor (runsc, systrap platform).
func TestConformanceGVisor(t *testing.T) {
	backendtest.Run(t, gvisorBackend(t))
}

// A sandbox of a backend set to runsc really runs under gVisor: user code
// sees gVisor's kernel, not the host's.
func TestSandboxUnderGVisor(t *testing.T) {
	b := gvisorBackend(t)
	_, c := backendtest.Sandbox(t, b, backend.Spec{})
	var out bytes.Buffer
	x, err := c.Exec(context.Background(), protocol.Exec{Argv: []string{"uname", "-r"}, TimeoutMs: 30_000, OutputBytes: 4096}, &out, &out)
	if err != nil || x.Code != 0 {
		t.Fatalf("uname -r: exit %+v, err %v, output %q", x, err, out.String())
	}
	if !strings.Contains(out.String(), "gvisor") {
		t.Errorf("uname -r in a sandbox under runsc: %q; want gVisor's kernel", out.String())
	}
}

// A runtime the engine does not have is refused when it is chosen, with
// the names it does have.
func TestSetRuntimeUnknown(t *testing.T) {
	b := testBackend(t)
	err := b.SetRuntime(context.Background(), "no-such-runtime")
	if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), `"no-such-runtime" is not registered`) || !strings.Contains(err.Error(), "runc") {
		t.Fatalf("SetRuntime(no-such-runtime) = %v; want an invalid error naming it and the registered runtimes", err)
	}
	if b.Runtime() != "" {
		t.Errorf("after a refused SetRuntime the runtime is %q; want the engine's default", b.Runtime())
	}
}
