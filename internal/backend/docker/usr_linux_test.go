package docker

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// Each container's /usr is its own overlay (usrMount): a flock one
// container holds on /usr/bin/env does not block another's, and a
// watch on the file in one does not see the other open it. The overlay's
// volume carries the sandbox's label and goes with the container.
func TestUsrPrivatePerContainer(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	var sbs [2]backend.Sandbox
	for i := range sbs {
		sb, err := b.CreateSandbox(ctx, backend.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.DestroySandbox(ctx, sb.ID)
		sbs[i] = sb
	}
	if n := b.volumes(t, sbs[0].ID); n != 1 {
		t.Errorf("sandbox %s has %d volumes with its label; want 1, its /usr overlay", sbs[0].ID, n)
	}
	// The first holds an exclusive lock on /usr/bin/env and keeps opening
	// and reading the file.
	holder, _ := b.Connect(ctx, sbs[0].ID)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := holder.Exec(ctx, protocol.Exec{Argv: []string{"python3", "-c", `
import fcntl, sys, time
f = open("/usr/bin/env", "rb")
fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
end = time.time() + 6
while time.time() < end:
    open("/usr/bin/env", "rb").read(1)
    time.sleep(0.02)
`}, TimeoutMs: 30_000, OutputBytes: 4096}, pw, io.Discard)
		pw.Close()
		done <- err
	}()
	line := make([]byte, 5)
	if _, err := io.ReadFull(pr, line); err != nil || string(line) != "held\n" {
		t.Fatalf("the first container did not take its lock: %q, %v", line, err)
	}
	go io.Copy(io.Discard, pr)
	other, _ := b.Connect(ctx, sbs[1].ID)
	var out bytes.Buffer
	x, err := other.Exec(ctx, protocol.Exec{Argv: []string{"python3", "-c", `
import ctypes, fcntl, os, select
f = open("/usr/bin/env", "rb")
try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("flock free")
except OSError as e:
    print("flock busy", e.errno)
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
if fd < 0 or libc.inotify_add_watch(fd, b"/usr/bin/env", 0x20 | 0x01) < 0:
    print("no inotify", ctypes.get_errno())
else:
    r, _, _ = select.select([fd], [], [], 2)
    print("event seen" if r else "no event")
`}, TimeoutMs: 30_000, OutputBytes: 4096}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "flock free\nno event\n" || x.Code != 0 {
		t.Errorf("second container: %q (exit %d); want \"flock free\\nno event\\n\": the first container's lock or opens of /usr/bin/env reached it", got, x.Code)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.DestroySandbox(ctx, sbs[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := b.volumes(t, sbs[0].ID); n != 0 {
		t.Errorf("sandbox %s left %d volumes after it was destroyed", sbs[0].ID, n)
	}
}

// volumes counts the engine's volumes with sandbox id's label.
func (b *Backend) volumes(t *testing.T, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := b.cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", labelSandbox+"="+id)})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Items)
}
