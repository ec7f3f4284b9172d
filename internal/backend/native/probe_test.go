//go:build linux

package native

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// completeProbe is a host that has everything kiln needs. The namespace list
// is written out here rather than taken from the package, so that dropping
// one from the policy shows up as a failing test.
func completeProbe() *Probe {
	ns := map[string]bool{}
	for _, n := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		ns[n] = true
	}
	return &Probe{
		Root:        true,
		Arch:        "amd64",
		Namespaces:  ns,
		MaxUserNS:   1000,
		Cgroups:     "cgroup v2 at /sys/fs/cgroup",
		Seccomp:     true,
		LandlockABI: 0, // optional: the sandbox still has its read-only root and seccomp
	}
}

func TestVerdictComplete(t *testing.T) {
	if err := completeProbe().Verdict(); err != nil {
		t.Errorf("Verdict of a complete host = %v, want nil", err)
	}
	p := completeProbe()
	p.MaxUserNS = -1 // unknown: the sysctl does not exist, so there is no cap
	if err := p.Verdict(); err != nil {
		t.Errorf("Verdict with user.max_user_namespaces unknown = %v, want nil", err)
	}
}

func TestVerdictMissing(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Probe)
		want   []string // every one in the message
	}{
		{"pid namespace", func(p *Probe) { p.Namespaces["pid"] = false }, []string{"pid namespaces"}},
		{"user namespace absent from the map", func(p *Probe) { delete(p.Namespaces, "user") }, []string{"user namespaces"}},
		{"cgroup namespace", func(p *Probe) { p.Namespaces["cgroup"] = false }, []string{"cgroup namespaces"}},
		{"no namespaces at all", func(p *Probe) { p.Namespaces = nil },
			[]string{"user namespaces", "mnt namespaces", "pid namespaces", "net namespaces", "ipc namespaces", "uts namespaces", "cgroup namespaces"}},
		{"user namespaces capped at 0", func(p *Probe) { p.MaxUserNS = 0 }, []string{"user.max_user_namespaces is 0"}},
		{"no seccomp", func(p *Probe) { p.Seccomp, p.SeccompWhy = false, "the kernel lacks CONFIG_SECCOMP_FILTER" },
			[]string{"seccomp", "CONFIG_SECCOMP_FILTER"}},
		{"no cgroups", func(p *Probe) { p.CgroupsErr = errors.New("no memory controller mounted") },
			[]string{"cgroups", "no memory controller mounted"}},
		{"not root", func(p *Probe) { p.Root = false }, []string{"must run as root"}},
		{"several at once", func(p *Probe) {
			p.Namespaces["net"] = false
			p.Seccomp, p.SeccompWhy = false, "no filter support"
			p.CgroupsErr = errors.New("read-only cgroup fs")
		}, []string{"net namespaces", "seccomp", "no filter support", "read-only cgroup fs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := completeProbe()
			tt.change(p)
			err := p.Verdict()
			if err == nil {
				t.Fatal("Verdict = nil, want an error")
			}
			if k := kiln.KindOf(err); k != kiln.Unsupported {
				t.Errorf("kind %s, want %s", k, kiln.Unsupported)
			}
			msg := kiln.Message(err)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message does not name %q:\n%s", w, msg)
				}
			}
		})
	}
}

// TestProbeHostHere: this machine (CI: Debian 12 as root) can make sandboxes,
// and the probe reads what the kernel says.
func TestProbeHostHere(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the verdict fails without it by design")
	}
	p := ProbeHost()
	if err := p.Verdict(); err != nil {
		t.Fatalf("Verdict on this host: %v\nprobe: %+v", err, p)
	}
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	want := 0
	if errno == 0 {
		want = int(abi)
	}
	if p.LandlockABI != want {
		t.Errorf("LandlockABI = %d, the kernel says %d", p.LandlockABI, want)
	}
}
