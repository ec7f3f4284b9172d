package service_test

import (
	"strconv"
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
	otherData := dataDir(t)
	other := start(t, otherData, "--pool", "2")
	defer other.stop()
	otherPid := other.Cmd.Process.Pid
	ourServers.Delete(otherPid) // a server the tests did not start
	ourOwners.Delete(otherData)
	var pool []string
	if onDocker {
		pool = dockerPool(t, otherData, 2)
	} else {
		pool = waitPool(t, otherPid, 2)
	}
	counted := map[string]bool{}
	for _, pid := range sandboxProcesses(t) {
		counted[pid] = true
	}
	for _, pid := range pool {
		if counted[pid] {
			t.Fatalf("another server's warm pool (process %s) is counted as the tests' sandboxes", pid)
		}
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

// waitPool waits until the server with pid holds sandboxes in at least n
// slots, and returns their processes.
func waitPool(t *testing.T, pid, n int) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		slots := map[int]bool{}
		var pids []string
		for _, p := range allSandboxProcs(t) {
			if p.holder == pid {
				slots[p.slot] = true
				pids = append(pids, strconv.Itoa(p.pid))
			}
		}
		if len(slots) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool did not fill: %d sandboxes after 60 s", len(slots))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
