package kernels

import (
	"testing"

	"github.com/kiln-dev/kiln/internal/kernelproto"
	"github.com/kiln-dev/kiln/internal/kernels/kerneltest"
)

// The kernels' tests run each kernel on the host with package kerneltest;
// these names keep them short.
type (
	localKernel = kerneltest.Kernel
	cellResult  = kerneltest.Result
)

// startLocal starts a kernel as the agent does: its source on fd 3.
func startLocal(t testing.TB, spec Spec, dir string) *localKernel {
	t.Helper()
	argv, payload := spec.Boot()
	return kerneltest.StartBoot(t, argv, spec.Env, payload, dir)
}

func text(t testing.TB, d kernelproto.Display) string { return kerneltest.Text(t, d) }

func mustUnmarshal(t testing.TB, line []byte, v any) { kerneltest.MustUnmarshal(t, line, v) }
