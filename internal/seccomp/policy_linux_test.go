//go:build amd64 || arm64

package seccomp

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// dangerous are calls that must fail with EPERM wherever the arch has them.
var dangerous = []string{
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "ptrace",
	"process_vm_readv", "process_vm_writev", "bpf", "perf_event_open",
	"keyctl", "add_key", "request_key", "userfaultfd", "kexec_load",
	"kexec_file_load", "init_module", "finit_module", "delete_module",
	"open_by_handle_at", "name_to_handle_at", "acct", "swapon", "swapoff",
	"reboot", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"syslog", "quotactl", "lookup_dcookie", "iopl", "ioperm", "fsopen",
	"fsconfig", "fsmount", "fspick", "open_tree", "move_mount",
	"mount_setattr", "vhangup", "uselib", "fanotify_init", "fanotify_mark",
	"pidfd_getfd", "nfsservctl", "kcmp", "move_pages", "migrate_pages",
	"mbind", "set_mempolicy", "process_madvise",
}

// fallbacks are calls that must fail with ENOSYS so runtimes fall back.
var fallbacks = []string{"clone3", "io_uring_setup", "io_uring_enter", "io_uring_register"}

func ruleFor(name string) (Rule, bool) {
	i := slices.IndexFunc(Rules, func(r Rule) bool { return r.Name == name })
	if i < 0 {
		return Rule{}, false
	}
	return Rules[i], true
}

func TestRulesResolve(t *testing.T) {
	seen := make(map[string]bool)
	for _, r := range Rules {
		if seen[r.Name] {
			t.Errorf("%q has two rules", r.Name)
		}
		seen[r.Name] = true
		_, numbered := native.nums[r.Name]
		absent := slices.Contains(native.absent, r.Name)
		if numbered == absent {
			t.Errorf("%q on %s: numbered %v, listed absent %v; want exactly one", r.Name, native.name, numbered, absent)
		}
	}
	for _, name := range native.absent {
		if !seen[name] {
			t.Errorf("%s lists %q as absent but no rule names it", native.name, name)
		}
	}
	if _, err := Program(); err != nil {
		t.Fatalf("Program() error: %v", err)
	}
}

func TestRulesDangerousDenied(t *testing.T) {
	check := func(names []string, want Action) {
		for _, name := range names {
			r, ok := ruleFor(name)
			if !ok {
				t.Errorf("%q: no rule, want %v", name, want)
				continue
			}
			if r.Action != want || len(r.Conds) != 0 {
				t.Errorf("%q: got %v with %d conditions, want plain %v", name, r.Action, len(r.Conds), want)
			}
		}
	}
	check(dangerous, EPERM)
	check(fallbacks, ENOSYS)
}

func TestCompileRejectsBadTables(t *testing.T) {
	a := arch{name: "test", audit: 1, nums: map[string]uint32{"read": 0, "write": 1}}
	tests := []struct {
		name  string
		rules []Rule
		want  string
	}{
		{"duplicate", []Rule{{Name: "read"}, {Name: "read"}, {Name: "write"}}, "two rules"},
		{"misspelt", []Rule{{Name: "read"}, {Name: "write"}, {Name: "wirte"}}, "no number"},
		{"unused number", []Rule{{Name: "read"}}, "no rule"},
		{"bad argument", []Rule{{Name: "read"}, {Name: "write", Conds: []Cond{{Checks: []Check{argIn(6, 1)}}}}}, "no argument 6"},
	}
	for _, tt := range tests {
		_, err := compile(tt.rules, a)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

// The policy spells out ABI values so it builds everywhere; check them.
func TestABIValues(t *testing.T) {
	tests := []struct {
		name      string
		got, want uint64
	}{
		{"EPERM", errnoEPERM, uint64(unix.EPERM)},
		{"ENOSYS", errnoENOSYS, uint64(unix.ENOSYS)},
		{"EAFNOSUPPORT", errnoEAFNOSUPPORT, uint64(unix.EAFNOSUPPORT)},
		{"AF_UNIX", afUnix, unix.AF_UNIX},
		{"AF_INET", afInet, unix.AF_INET},
		{"AF_INET6", afInet6, unix.AF_INET6},
		{"AF_NETLINK", afNetlink, unix.AF_NETLINK},
		{"NETLINK_ROUTE", netlinkRoute, unix.NETLINK_ROUTE},
		{"SOCK_RAW", sockRaw, unix.SOCK_RAW},
		{"SOCK_PACKET", sockPacket, unix.SOCK_PACKET},
		{"TIOCSTI", tiocsti, unix.TIOCSTI},
		{"TIOCLINUX", tioclinux, unix.TIOCLINUX},
		{"TIOCSETD", tiocsetd, unix.TIOCSETD},
		{"CLONE_NEW*", cloneNewNamespace, unix.CLONE_NEWTIME | unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP |
			unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET},
		{"SECCOMP_RET_ALLOW", uint64(Allow), unix.SECCOMP_RET_ALLOW},
		{"SECCOMP_RET_KILL_PROCESS", uint64(KillProcess), unix.SECCOMP_RET_KILL_PROCESS},
		{"SECCOMP_RET_ERRNO", retErrno, unix.SECCOMP_RET_ERRNO},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
	if sockTypeMask&(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC) != 0 {
		t.Errorf("sockTypeMask %#x overlaps SOCK_NONBLOCK|SOCK_CLOEXEC", sockTypeMask)
	}
}
