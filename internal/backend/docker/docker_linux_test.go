package docker

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/backendtest"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// testBackend is the Docker backend on this test binary's image (the
// test binary is the agent: init routes AgentArg), or a skip when no
// engine answers. In CI scripts/deps --test starts one, so nothing skips.
func testBackend(t *testing.T) *Backend {
	t.Helper()
	if os.Getuid() != 0 && os.Getenv("DOCKER_HOST") == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil {
			t.Skip("no Docker engine: /var/run/docker.sock is missing (scripts/deps --test starts one)")
		}
	}
	b, err := New(context.Background())
	if err != nil {
		t.Skipf("no Docker engine is reachable: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ref, _, err := b.BuildImage(context.Background(), exe)
	if err != nil {
		t.Fatal(err)
	}
	b.SetImage(ref)
	testImage = ref
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, testBackend(t))
}

// Rebuilding from the same inputs is a no-op: the tag is their hash.
func TestImageContentAddressed(t *testing.T) {
	b := testBackend(t)
	exe, _ := os.Executable()
	ref1, _, err := b.BuildImage(context.Background(), exe)
	if err != nil {
		t.Fatal(err)
	}
	ref2, built, err := b.BuildImage(context.Background(), exe)
	if err != nil {
		t.Fatal(err)
	}
	if ref1 != ref2 || built {
		t.Errorf("rebuild: %s then %s (built again: %v); want the same tag and no build", ref1, ref2, built)
	}
	other, err := os.CreateTemp(t.TempDir(), "agent")
	if err != nil {
		t.Fatal(err)
	}
	other.WriteString("not kiln")
	other.Close()
	a, _ := imageTar(exe, "/etc")
	c, _ := imageTar(other.Name(), "/etc")
	if string(a) == string(c) {
		t.Error("another agent binary made the same layer")
	}
}

// A sandbox whose kiln died (nothing holds it) is still found by its
// label, and destroying it removes the container.
func TestReapByLabel(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	sb, err := b.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	// A new backend knows nothing of it, as after a crash.
	b2, err := New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	ids, err := b2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, id := range ids {
		found = found || id == sb.ID
	}
	if !found {
		t.Fatalf("List %v misses %s", ids, sb.ID)
	}
	if err := b2.DestroySandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	ids, _ = b2.List(ctx)
	for _, id := range ids {
		if id == sb.ID {
			t.Errorf("%s is still listed after it was reaped", sb.ID)
		}
	}
	b.DestroySandbox(ctx, sb.ID)
}

// The container runs under kiln's seccomp profile, not the engine's
// default: io_uring_setup, which Engine 20.10's default profile allows,
// fails with ENOSYS as under the native filter.
func TestKilnSeccompProfile(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	sb, err := b.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.DestroySandbox(ctx, sb.ID)
	c, _ := b.Connect(ctx, sb.ID)
	var out bytes.Buffer
	code := "import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(425, 1, 0); print(r, ctypes.get_errno())"
	x, err := c.Exec(ctx, protocol.Exec{Argv: []string{"python3", "-c", code}, TimeoutMs: 30_000, OutputBytes: 4096}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "-1 38" {
		t.Errorf("io_uring_setup in a container: %q (exit %+v); want -1 38 (ENOSYS)", got, x)
	}
}

// Two kilns on one engine, each with its owner, never list (so never
// reap) each other's sandboxes; Reap removes the owner's own, such as
// the stopped container a crashed kiln left.
func TestReapOwner(t *testing.T) {
	mine, theirs := testBackend(t), testBackend(t)
	mine.SetOwner("test-mine-" + newID())
	theirs.SetOwner("test-theirs-" + newID())
	ctx := context.Background()
	sb, err := mine.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := theirs.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.DestroySandbox(ctx, other.ID)
	// The stream closes as when kiln dies: the agent exits, the container
	// stops and stays.
	c, _ := mine.Connect(ctx, sb.ID)
	c.Close()
	again := testBackend(t)
	again.SetOwner(mine.owner)
	n, err := again.Reap(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Reap: %d, %v; want 1 sandbox reaped", n, err)
	}
	if ids, _ := again.List(ctx); len(ids) != 0 {
		t.Errorf("after Reap the owner still lists %v", ids)
	}
	if n := again.volumes(t, sb.ID); n != 0 {
		t.Errorf("after Reap the reaped sandbox's /usr overlay volume is left (%d volumes with its label)", n)
	}
	if ids, _ := theirs.List(ctx); !slices.Contains(ids, other.ID) {
		t.Errorf("the other owner's sandbox %s was reaped or is not listed: %v", other.ID, ids)
	}
}
