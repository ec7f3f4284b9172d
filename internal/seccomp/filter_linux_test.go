//go:build amd64 || arm64

package seccomp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
)

// seccompData is struct seccomp_data as the filter sees it.
type seccompData struct {
	nr, arch uint32
	args     [6]uint64
}

// packet lays d out for golang.org/x/net/bpf's VM.
//
// The kernel loads each 32-bit word of seccomp_data in native byte order
// (little-endian on amd64 and arm64); the VM always loads big-endian. The
// filter reads only whole, aligned words, so writing every word big-endian
// at its kernel offset gives the VM the values the kernel would see. A
// 64-bit argument is two words: the low one at 16+8i, the high one at
// 20+8i, as on a little-endian machine.
func (d seccompData) packet() []byte {
	p := make([]byte, seccompLen)
	binary.BigEndian.PutUint32(p[offNr:], d.nr)
	binary.BigEndian.PutUint32(p[offArch:], d.arch)
	for i, a := range d.args {
		off := argOffset(i)
		binary.BigEndian.PutUint32(p[off:], uint32(a))
		binary.BigEndian.PutUint32(p[off+4:], uint32(a>>32))
	}
	return p
}

func newVM(tb testing.TB) *bpf.VM {
	tb.Helper()
	raw, err := Program()
	if err != nil {
		tb.Fatalf("Program() error: %v", err)
	}
	return vmFor(tb, raw)
}

func vmFor(tb testing.TB, raw []bpf.RawInstruction) *bpf.VM {
	tb.Helper()
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		tb.Fatalf("Program() has instructions x/net/bpf cannot decode")
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		tb.Fatalf("bpf.NewVM: %v", err)
	}
	return vm
}

// verdict runs the filter on d. The VM returns a RetConstant's value as is
// (x/net/bpf v0.62.0 does not clamp it to the packet length; if a later
// version did, every verdict here would come back as 64 and the tests would
// fail rather than pass). A load outside the packet makes the VM return 0,
// which is SECCOMP_RET_KILL_THREAD, a verdict the filter never gives.
func verdict(tb testing.TB, vm *bpf.VM, d seccompData) Action {
	tb.Helper()
	n, err := vm.Run(d.packet())
	if err != nil {
		tb.Fatalf("vm.Run(%+v): %v", d, err)
	}
	return Action(uint32(n))
}

func nr(tb testing.TB, name string) uint32 {
	tb.Helper()
	n, ok := native.nums[name]
	if !ok {
		tb.Fatalf("no number for %q on %s", name, native.name)
	}
	return n
}

func TestProgramVerdicts(t *testing.T) {
	vm := newVM(t)
	const (
		cloneThread = 0x003d0f00 // CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
		cloneFork   = 0x01200011 // SIGCHLD|CLONE_CHILD_SETTID|CLONE_CHILD_CLEARTID, glibc's fork
		newUser     = 0x10000000
		afPacket    = 17
		afAlg       = 38
		sockStream  = 1
		sockCloexec = 0x80000
		ipprotoICMP = 1
		netlinkAud  = 9
		perLinux32  = 8
		hi          = 0xdead_beef << 32 // high bits the filter must ignore
	)
	x32 := DefaultAction // arm64 has no x32 ABI: just an unknown number
	if native.x32 {
		x32 = KillProcess
	}
	tests := []struct {
		name string
		d    seccompData
		want Action
	}{
		{"read", seccompData{nr: nr(t, "read")}, Allow},
		{"exit_group", seccompData{nr: nr(t, "exit_group")}, Allow},
		{"clone thread", seccompData{nr: nr(t, "clone"), args: [6]uint64{cloneThread}}, Allow},
		{"clone fork", seccompData{nr: nr(t, "clone"), args: [6]uint64{cloneFork}}, Allow},
		{"clone CLONE_NEWUSER", seccompData{nr: nr(t, "clone"), args: [6]uint64{newUser | 0x11}}, EPERM},
		{"clone CLONE_NEWNET", seccompData{nr: nr(t, "clone"), args: [6]uint64{0x40000000}}, EPERM},
		{"clone3", seccompData{nr: nr(t, "clone3")}, ENOSYS},
		{"io_uring_setup", seccompData{nr: nr(t, "io_uring_setup")}, ENOSYS},
		{"unknown 999", seccompData{nr: 999}, ENOSYS},
		{"largest number", seccompData{nr: 0xffffffff &^ x32Bit}, ENOSYS},
		{"mount", seccompData{nr: nr(t, "mount")}, EPERM},
		{"unshare", seccompData{nr: nr(t, "unshare")}, EPERM},
		{"socket AF_PACKET", seccompData{nr: nr(t, "socket"), args: [6]uint64{afPacket, 3}}, EAFNOSUPPORT},
		{"socket AF_ALG", seccompData{nr: nr(t, "socket"), args: [6]uint64{afAlg, 5}}, EAFNOSUPPORT},
		{"socket AF_INET SOCK_RAW", seccompData{nr: nr(t, "socket"), args: [6]uint64{afInet, sockRaw, ipprotoICMP}}, EPERM},
		{"socket AF_INET6 SOCK_RAW|SOCK_CLOEXEC", seccompData{nr: nr(t, "socket"), args: [6]uint64{afInet6, sockRaw | sockCloexec}}, EPERM},
		{"socket AF_INET SOCK_PACKET", seccompData{nr: nr(t, "socket"), args: [6]uint64{afInet, sockPacket}}, EPERM},
		{"socket AF_INET SOCK_STREAM", seccompData{nr: nr(t, "socket"), args: [6]uint64{afInet, sockStream}}, Allow},
		{"socket AF_INET6 SOCK_STREAM|SOCK_CLOEXEC", seccompData{nr: nr(t, "socket"), args: [6]uint64{afInet6, sockStream | sockCloexec}}, Allow},
		{"socket AF_UNIX SOCK_RAW", seccompData{nr: nr(t, "socket"), args: [6]uint64{afUnix, sockRaw}}, Allow},
		{"socket AF_NETLINK NETLINK_ROUTE", seccompData{nr: nr(t, "socket"), args: [6]uint64{afNetlink, sockRaw, netlinkRoute}}, Allow},
		{"socket AF_NETLINK NETLINK_AUDIT", seccompData{nr: nr(t, "socket"), args: [6]uint64{afNetlink, sockRaw, netlinkAud}}, EAFNOSUPPORT},
		{"socketpair AF_UNIX", seccompData{nr: nr(t, "socketpair"), args: [6]uint64{afUnix, sockStream}}, Allow},
		{"socketpair AF_PACKET", seccompData{nr: nr(t, "socketpair"), args: [6]uint64{afPacket, sockStream}}, EAFNOSUPPORT},
		{"ioctl TIOCSTI", seccompData{nr: nr(t, "ioctl"), args: [6]uint64{0, tiocsti}}, EPERM},
		{"ioctl TIOCSTI with high bits", seccompData{nr: nr(t, "ioctl"), args: [6]uint64{0, hi | tiocsti}}, EPERM},
		{"ioctl TIOCLINUX", seccompData{nr: nr(t, "ioctl"), args: [6]uint64{0, tioclinux}}, EPERM},
		{"ioctl TIOCSETD", seccompData{nr: nr(t, "ioctl"), args: [6]uint64{0, tiocsetd}}, EPERM},
		{"ioctl TCGETS", seccompData{nr: nr(t, "ioctl"), args: [6]uint64{0, 0x5401}}, Allow},
		{"personality query", seccompData{nr: nr(t, "personality"), args: [6]uint64{perQuery}}, Allow},
		{"personality PER_LINUX", seccompData{nr: nr(t, "personality"), args: [6]uint64{perLinux}}, Allow},
		{"personality PER_LINUX32", seccompData{nr: nr(t, "personality"), args: [6]uint64{perLinux32}}, EPERM},
		{"wrong arch", seccompData{nr: nr(t, "read"), arch: 0x40000003}, KillProcess}, // AUDIT_ARCH_I386
		{"x32 bit", seccompData{nr: x32Bit | nr(t, "read")}, x32},
	}
	for _, tt := range tests {
		if tt.d.arch == 0 {
			tt.d.arch = native.audit
		}
		if got := verdict(t, vm, tt.d); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Every rule gives its plain verdict when no condition matches, and every
// number the table does not name gets the default.
func TestProgramCoversTable(t *testing.T) {
	vm := newVM(t)
	named := make(map[uint32]bool)
	for _, r := range Rules {
		n, ok := native.nums[r.Name]
		if !ok {
			continue
		}
		named[n] = true
		d := seccompData{nr: n, arch: native.audit}
		if got, want := verdict(t, vm, d), evaluate(Rules, native, d); got != want {
			t.Errorf("%s with zero arguments: got %v, want %v", r.Name, got, want)
		}
	}
	for n := range uint32(1024) {
		if named[n] {
			continue
		}
		if got := verdict(t, vm, seccompData{nr: n, arch: native.audit}); got != DefaultAction {
			t.Errorf("unnamed number %d: got %v, want %v", n, got, DefaultAction)
		}
	}
}

// The real table's subtrees are short; a bigger one must route conditional
// jumps longer than 255 instructions through unconditional ones.
func TestCompileLongJumps(t *testing.T) {
	a := arch{name: "test", audit: 7, nums: make(map[string]uint32)}
	var rules []Rule
	for i := range uint32(200) {
		name := fmt.Sprintf("call%d", i)
		a.nums[name] = 2 * i
		rules = append(rules, Rule{Name: name, Action: Allow, Conds: []Cond{
			{Checks: []Check{argIn(0, i)}, Action: EPERM},
		}})
	}
	raw, err := compile(rules, a)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	ins, _ := bpf.Disassemble(raw)
	if !slices.ContainsFunc(ins, func(i bpf.Instruction) bool { _, ok := i.(bpf.Jump); return ok }) {
		t.Fatalf("no unconditional jump in a %d-instruction program; the test does not reach the long-jump path", len(ins))
	}
	vm := vmFor(t, raw)
	for n := range uint32(402) {
		for _, arg := range []uint64{uint64(n / 2), 1000} {
			d := seccompData{nr: n, arch: a.audit, args: [6]uint64{arg}}
			if got, want := verdict(t, vm, d), evaluate(rules, a, d); got != want {
				t.Errorf("%+v: got %v, want %v", d, got, want)
			}
		}
	}
}
