package docker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// The agent's socket serves the one connection the service accepted:
// once the sandbox is up, the socket file is gone from the host, and
// user code that connects to it inside the container is refused.
func TestAgentSocketOneConnection(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	sb, err := b.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.DestroySandbox(ctx, sb.ID)
	dir, err := b.socketDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, sb.ID+".sock")); !os.IsNotExist(err) {
		t.Errorf("the host's socket file is still there after the agent connected: %v", err)
	}
	c, _ := b.Connect(ctx, sb.ID)
	var out bytes.Buffer
	code := "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n  s.connect('" + agentSocketPath + "'); print('connected')\nexcept OSError as e: print(type(e).__name__)"
	if _, err := c.Exec(ctx, protocol.Exec{Argv: []string{"python3", "-c", code}, TimeoutMs: 30_000, OutputBytes: 4096}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "ConnectionRefusedError" {
		t.Errorf("user code connecting to the agent's socket: %q; want ConnectionRefusedError", got)
	}
}

// A sandbox without a host workspace gets a tmpfs /workspace of the
// limits' size (a volume had none), owned by its user, where programs
// may be run.
func TestWorkspaceTmpfsLimited(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	sb, err := b.CreateSandbox(ctx, backend.Spec{Limits: kiln.Limits{WorkspaceBytes: 4 * kiln.MiB}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.DestroySandbox(ctx, sb.ID)
	c, _ := b.Connect(ctx, sb.ID)
	var out bytes.Buffer
	script := "cp /usr/bin/true /workspace/t && /workspace/t && echo ran; " +
		"dd if=/dev/zero of=/workspace/big bs=1M count=8 2>&1 | grep -o 'No space left' ; stat -c %u /workspace"
	if _, err := c.Exec(ctx, protocol.Exec{Argv: []string{"sh", "-c", script}, TimeoutMs: 30_000, OutputBytes: 4096}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(out.String()), []string{"ran", "No", "space", "left", "1199000000"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("in /workspace: %q; want %q", out.String(), strings.Join(want, " "))
	}
}
