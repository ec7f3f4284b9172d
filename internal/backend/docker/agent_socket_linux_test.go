package docker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

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

// A container that stops before its agent connects fails the creation
// at once, with what it wrote to stderr, not after the 30 s the agent
// is given to connect.
func TestAgentExitBeforeConnect(t *testing.T) {
	b := testBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	id := newID()
	ln, agentMount, err := b.listenAgent(id)
	if err != nil {
		t.Fatal(err)
	}
	created, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Image: b.image,
		Config: &container.Config{Entrypoint: []string{"/bin/sh", "-c", "echo the agent broke >&2; exit 3"},
			User: fmt.Sprintf("%d:%d", UID, UID), Labels: b.labels(id)},
		HostConfig: &container.HostConfig{NetworkMode: "none", LogConfig: agentLogConfig,
			Mounts: []mount.Mount{{Type: mount.TypeBind, Source: "/usr", Target: "/usr", ReadOnly: true}, agentMount}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.remove(context.Background(), created.ID)
	start := time.Now()
	conn, err := b.startAgent(ctx, created.ID, ln)
	if err == nil {
		conn.Close()
		t.Fatal("a container without an agent started as a sandbox")
	}
	if !strings.Contains(err.Error(), "stopped before its agent connected") || !strings.Contains(err.Error(), "the agent broke") {
		t.Errorf("error %q; want it to say the container stopped, with its stderr", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the failure took %v: the creation waited for the agent's deadline", d)
	}
}
