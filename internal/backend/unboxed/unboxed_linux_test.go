package unboxed

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/backendtest"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, New(t.TempDir()))
}

// Without isolation every attack of the security half succeeds: the
// suite's attacks can tell a sandbox from none.
func TestAttacksSucceedWithoutIsolation(t *testing.T) {
	b := New(t.TempDir())
	if b.Capabilities().Isolation {
		t.Fatal("the unboxed backend claims isolation")
	}
	for _, a := range backendtest.Attacks {
		t.Run(a.Name, func(t *testing.T) {
			_, c := backendtest.Sandbox(t, b, backend.Spec{})
			if err := a.Try(context.Background(), c); err == nil {
				t.Errorf("%s found nothing on a backend without isolation", a.Name)
			}
		})
	}
}

// No command can choose this backend: cmd/kiln does not link it.
func TestNotInKiln(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/kiln-dev/kiln/cmd/kiln").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list found only %v", deps)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/kiln-dev/kiln/internal/backend/") && !strings.HasSuffix(d, "/native") {
			if d == "github.com/kiln-dev/kiln/internal/backend/unboxed" || d == "github.com/kiln-dev/kiln/internal/backend/backendtest" {
				t.Errorf("cmd/kiln imports %s", d)
			}
		}
	}
}
