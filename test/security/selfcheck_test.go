//go:build linux

package security

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/cgroups"
)

// TestHarnessSeesProblems proves that the checks every case ends with can
// fail: a changed canary, a process in the sandbox uid range and a cgroup
// under the root group are each reported, and no longer once undone.
func TestHarnessSeesProblems(t *testing.T) {
	s := env(t)
	t.Run("canary", func(t *testing.T) {
		p := filepath.Join(s.tmpCanary, "nested", "notes.txt")
		old, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(old, "changed\n"...), 0); err != nil {
			t.Fatal(err)
		}
		got := s.canaryProblems()
		if err := os.WriteFile(p, old, 0); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !strings.Contains(got[0], s.tmpCanary) {
			t.Errorf("after changing %s the canary check said %q", p, got)
		}
		if got := s.canaryProblems(); len(got) != 0 {
			t.Errorf("after undoing the change the canary check still says %q", got)
		}
	})
	if s.onDocker() {
		t.Run("docker", func(t *testing.T) { s.dockerSelfCheck(t) })
	}
	t.Run("process", func(t *testing.T) {
		skipOnDocker(t, s, nativeLeftovers)
		// A process as a uid of the last slot, which nothing else uses.
		uid := uint32(uidBase + (slotCount-1)*uidsPerSlot + 1000)
		cmd := exec.Command("/bin/sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		want := fmt.Sprintf("process %d (sleep) uid %d", cmd.Process.Pid, uid)
		if l := s.findLeftover(t, want); l == nil || l.owner != os.Getpid() {
			t.Errorf("a process of uid %d started by the test is not reported as this test's leftover: %+v", uid, l)
		}
		cmd.Process.Kill()
		cmd.Wait()
		if l := s.findLeftover(t, want); l != nil {
			t.Errorf("a killed process is still reported: %+v", l)
		}
	})
	t.Run("cgroup", func(t *testing.T) {
		skipOnDocker(t, s, nativeLeftovers)
		id := "kiln-security-selfcheck-" + randomHex(4)
		g, err := s.cg.Create(id, cgroups.Limits{MemoryBytes: 64 << 20, Pids: 16}, cgroups.DefaultAgentLimits())
		if err != nil {
			t.Fatal(err)
		}
		want := "cgroup " + cgroupRoot + "/" + id
		found := s.findLeftover(t, want) != nil
		if err := g.Destroy(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !found {
			t.Errorf("the cgroup %s/%s is not reported", cgroupRoot, id)
		}
		if s.findLeftover(t, want) != nil {
			t.Errorf("a destroyed cgroup is still reported")
		}
	})
	// A cgroup with no process whose live file another process holds (a
	// sandbox that a kiln process on this host is making or tearing down)
	// is that process's, not the suite's leftover.
	t.Run("cgroup of another process", func(t *testing.T) {
		skipOnDocker(t, s, nativeLeftovers)
		id := "kiln-security-selfcheck-" + randomHex(4)
		live := filepath.Join(runtimeDir, "live", id)
		if err := os.MkdirAll(filepath.Dir(live), 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(live)
		holder := exec.Command("/usr/bin/flock", "--exclusive", live, "/bin/sleep", "30")
		if err := holder.Start(); err != nil {
			t.Skipf("cannot start flock: %v", err)
		}
		defer holder.Wait()
		defer holder.Process.Kill()
		for deadline := time.Now().Add(5 * time.Second); liveHolder(id) == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		g, err := s.cg.Create(id, cgroups.Limits{MemoryBytes: 64 << 20, Pids: 16}, cgroups.DefaultAgentLimits())
		if err != nil {
			t.Fatal(err)
		}
		defer g.Destroy(t.Context())
		if l := s.findLeftover(t, "cgroup "+cgroupRoot+"/"+id); l == nil || l.owner != holder.Process.Pid {
			t.Errorf("an empty cgroup whose live file pid %d holds: %+v; want it listed as that process's", holder.Process.Pid, l)
		}
	})
}

// TestHarnessIgnoresServiceWorkspaces: a kiln service's tmpfs session
// workspace (a `kiln serve` on the same machine) is not the suite's
// leftover; a kiln tmpfs mounted anywhere else is.
func TestHarnessIgnoresServiceWorkspaces(t *testing.T) {
	s := env(t)
	skipOnDocker(t, s, "a service's tmpfs workspace is a native kiln serve's; the Docker leftover check does not look at kiln's tmpfs mounts")
	dir := t.TempDir()
	for _, tt := range []struct {
		path    string
		service bool
	}{
		{filepath.Join(dir, "data", "workspaces", "0123456789abcdef0123456789abcdef"), true},
		{filepath.Join(dir, "elsewhere"), false},
	} {
		if err := os.MkdirAll(tt.path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("kiln-workspace", tt.path, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		var found *leftover
		all, err := s.leftovers()
		if err != nil {
			t.Fatal(err)
		}
		for i := range all {
			if strings.Contains(all[i].what, " "+tt.path+" ") {
				found = &all[i]
			}
		}
		syscall.Unmount(tt.path, syscall.MNT_DETACH)
		switch {
		case found == nil:
			t.Errorf("the mount on %s is not listed at all", tt.path)
		case tt.service && found.owner != serviceOwner:
			t.Errorf("a service's workspace %s is counted as the suite's leftover: %+v", tt.path, *found)
		case !tt.service && found.owner == serviceOwner:
			t.Errorf("a kiln tmpfs on %s is taken for a service's workspace and ignored", tt.path)
		}
	}
}

// findLeftover returns the leftover whose description starts with prefix.
func (s *suite) findLeftover(t *testing.T, prefix string) *leftover {
	t.Helper()
	// A process may take a moment to show its new credentials.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		all, err := s.leftovers()
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(all, func(l leftover) bool { return strings.HasPrefix(l.what, prefix) }); i >= 0 {
			return &all[i]
		}
		if time.Now().After(deadline) {
			return nil
		}
	}
}
