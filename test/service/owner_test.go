package service_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
)

// TestOwnSandboxesOnly: the leftover checks count the sandboxes of the
// servers the tests started, and not those of another `kiln serve` on the
// same machine (as scripts/install leaves it running, with its warm pool).
func TestOwnSandboxesOnly(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 3*time.Minute)
	other := start(t, dataDir(t), "--pool", "2")
	defer other.stop()
	ourServers.Delete(other.cmd.Process.Pid) // a server the tests did not start
	waitPoolSandboxes(t, 2)
	if left := sandboxProcesses(t); len(left) != 0 {
		t.Fatalf("another server's warm pool counted as the tests' sandboxes: %v", left)
	}

	srv := start(t, dataDir(t))
	defer srv.stop()
	c := srv.client(srv.key)
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sandboxProcesses(t)) == 0 {
		t.Fatal("the session's sandbox of a server the tests started is not counted")
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	waitNoSandboxes(t, "after deleting the session")
}

// waitPoolSandboxes waits until sandboxes of at least n distinct slots run.
func waitPoolSandboxes(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		slots := map[uint64]bool{}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile("/proc/" + e.Name() + "/status")
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
					if uid, _ := strconv.ParseUint(f[1], 10, 32); uid >= uidBase {
						slots[(uid-uidBase)/uidsPerSlot] = true
					}
				}
			}
		}
		if len(slots) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool did not fill: %d sandboxes after 60 s", len(slots))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
