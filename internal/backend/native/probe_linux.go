package native

import (
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/cgroups"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/seccomp"
)

// Probe is what this host offers for sandboxing, read without changing
// anything. `kiln doctor` prints it; New refuses to work when Verdict fails.
type Probe struct {
	Root        bool
	Arch        string
	Namespaces  map[string]bool // by /proc/self/ns name
	MaxUserNS   int64           // user.max_user_namespaces, -1 if unknown
	Cgroups     string          // Describe() of the detected setup
	CgroupsErr  error
	Seccomp     bool
	SeccompWhy  string
	LandlockABI int // 0 when the kernel has no Landlock
	Sysctls     []Sysctl
}

// Sysctl is a kernel setting that widens what sandboxed code can reach.
type Sysctl struct {
	Name  string
	Value string // "" when the setting does not exist on this kernel
	Risky bool
	Note  string
}

// Namespaces kiln needs, as named in /proc/self/ns.
var neededNamespaces = []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}

// ProbeHost inspects the host.
func ProbeHost() *Probe {
	p := &Probe{Root: os.Geteuid() == 0, Arch: runtime.GOARCH, Namespaces: map[string]bool{}, MaxUserNS: -1}
	for _, ns := range neededNamespaces {
		_, err := os.Stat("/proc/self/ns/" + ns)
		p.Namespaces[ns] = err == nil
	}
	if v, err := readInt("/proc/sys/user/max_user_namespaces"); err == nil {
		p.MaxUserNS = v
	}
	if h, err := cgroups.Detect(); err != nil {
		p.CgroupsErr = err
	} else {
		p.Cgroups = h.Describe()
	}
	p.Seccomp, p.SeccompWhy = seccomp.Supported()
	if _, err := seccomp.Program(); err != nil {
		p.Seccomp, p.SeccompWhy = false, err.Error()
	}
	if v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); e == 0 {
		p.LandlockABI = int(v)
	}
	p.Sysctls = probeSysctls()
	return p
}

// Verdict says why sandboxes cannot be made securely here, or nil.
func (p *Probe) Verdict() error {
	var missing []string
	for _, ns := range neededNamespaces {
		if !p.Namespaces[ns] {
			missing = append(missing, ns+" namespaces")
		}
	}
	if p.MaxUserNS == 0 {
		missing = append(missing, "user namespaces (user.max_user_namespaces is 0)")
	}
	if !p.Seccomp {
		why := ""
		if p.SeccompWhy != "" {
			why = " (" + p.SeccompWhy + ")"
		}
		missing = append(missing, "seccomp filters"+why)
	}
	if p.CgroupsErr != nil {
		missing = append(missing, "usable cgroups ("+p.CgroupsErr.Error()+")")
	}
	if len(missing) > 0 {
		also := ""
		if !p.Root {
			also = " (and kiln must run as root)"
		}
		return kiln.Errorf(kiln.Unsupported, "this host cannot run sandboxes securely; it lacks %s%s. kiln will not run code with weaker isolation", strings.Join(missing, ", "), also)
	}
	if !p.Root {
		return kiln.Errorf(kiln.Unsupported, "kiln must run as root to create sandboxes: it maps each sandbox to its own unprivileged host uid range and creates the sandbox's cgroups, and an ordinary user can do neither without a delegated cgroup and subordinate uid ranges. Run it as root (for example with sudo); user code still never runs as host root")
	}
	return nil
}

func probeSysctls() []Sysctl {
	rows := []struct {
		name, path string
		risky      func(string) bool
		note       string
	}{
		{"kernel.io_uring_disabled", "/proc/sys/kernel/io_uring_disabled", func(v string) bool { return v == "0" },
			"io_uring is open to every process; kiln's seccomp filter blocks it inside sandboxes (set 2 to close it host-wide)"},
		{"dev.tty.legacy_tiocsti", "/proc/sys/dev/tty/legacy_tiocsti", func(v string) bool { return v == "1" },
			"TIOCSTI can push input into a terminal; kiln's seccomp filter blocks it and sandboxes have no controlling terminal (set 0 host-wide)"},
		{"kernel.unprivileged_bpf_disabled", "/proc/sys/kernel/unprivileged_bpf_disabled", func(v string) bool { return v == "0" },
			"unprivileged eBPF is allowed; kiln's seccomp filter blocks bpf() inside sandboxes (set 2 host-wide)"},
		{"vm.unprivileged_userfaultfd", "/proc/sys/vm/unprivileged_userfaultfd", func(v string) bool { return v == "1" },
			"userfaultfd is open to unprivileged users; kiln's seccomp filter blocks it inside sandboxes (set 0 host-wide)"},
		{"kernel.unprivileged_userns_clone", "/proc/sys/kernel/unprivileged_userns_clone", func(v string) bool { return v == "1" },
			"unprivileged users may create user namespaces; kiln blocks nested ones inside sandboxes"},
		{"kernel.perf_event_paranoid", "/proc/sys/kernel/perf_event_paranoid", func(v string) bool { n, _ := strconv.Atoi(v); return n < 2 },
			"perf events are open to unprivileged users; kiln's seccomp filter blocks perf_event_open inside sandboxes"},
	}
	var out []Sysctl
	for _, r := range rows {
		b, err := os.ReadFile(r.path)
		s := Sysctl{Name: r.name}
		if err == nil {
			s.Value = strings.TrimSpace(string(b))
			s.Risky = r.risky(s.Value)
			if s.Risky {
				s.Note = r.note
			}
		}
		out = append(out, s)
	}
	return out
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// LandlockFull is the Landlock ABI that has every right the spawn stage
// asks for (device ioctls came in 5, scoping in 6). Below it Landlock is
// applied as far as the kernel allows; at or above it, a failure to apply
// it stops the execution.
const LandlockFull = 6
