// Package seccomp is the system-call policy for untrusted user code.
//
// The policy is data: Rules, in policy.go, names every system call the
// sandbox treats specially and says what happens to it. Program compiles the
// table for the running architecture into a classic BPF seccomp filter, and
// Install loads that filter on the calling thread just before it execs the
// user's program.
//
// The filter's verdicts, in order:
//   - a call made through another ABI (i386 int 0x80, x32) kills the process;
//   - a call in the table gets its rule's action, possibly decided by its
//     arguments (clone, socket, ioctl, personality);
//   - any other call fails with ENOSYS, so language runtimes fall back to an
//     older call (clone3 to clone, io_uring to epoll) instead of failing.
//
// Install, Program and Supported work on linux/amd64 and linux/arm64; on other
// platforms they report errors.ErrUnsupported.
package seccomp

import "fmt"

// Action is the value a seccomp filter returns for a call (SECCOMP_RET_*).
type Action uint32

const (
	retErrno  = 0x00050000 // SECCOMP_RET_ERRNO; the low 16 bits are the errno
	retData   = 0x0000ffff // SECCOMP_RET_DATA
	retAction = 0xffff0000 // SECCOMP_RET_ACTION_FULL
)

// The actions the policy uses. Errno values are those of amd64 and arm64.
const (
	Allow        Action = 0x7fff0000 // SECCOMP_RET_ALLOW
	KillProcess  Action = 0x80000000 // SECCOMP_RET_KILL_PROCESS
	EPERM        Action = retErrno | errnoEPERM
	ENOSYS       Action = retErrno | errnoENOSYS
	EAFNOSUPPORT Action = retErrno | errnoEAFNOSUPPORT
)

// DefaultAction is the verdict for a call the table does not name.
const DefaultAction = ENOSYS

// String names the action for tests and for `kiln doctor`.
func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case KillProcess:
		return "kill-process"
	case EPERM:
		return "EPERM"
	case ENOSYS:
		return "ENOSYS"
	case EAFNOSUPPORT:
		return "EAFNOSUPPORT"
	}
	if a&retAction == retErrno {
		return fmt.Sprintf("errno %d", uint32(a)&retData)
	}
	return fmt.Sprintf("action %#x", uint32(a))
}

// Rule says what happens to one system call.
type Rule struct {
	Name   string // as in the kernel's syscall table, e.g. "newfstatat"
	Action Action // the verdict when no Cond matches
	Conds  []Cond // tried in order; the first whose Checks all hold decides
}

// Cond gives Action when every one of its Checks holds.
type Cond struct {
	Checks []Check
	Action Action
}

// Op is how a Check compares an argument with its values.
type Op int

const (
	In    Op = iota // the masked argument is one of Vals
	NotIn           // the masked argument is none of Vals
)

func (o Op) String() string {
	if o == NotIn {
		return "not in"
	}
	return "in"
}

// Check tests the low 32 bits of one argument, masked. The high bits are
// never looked at, so a Check may only be used on an argument the kernel
// itself reads as 32 bits (int, unsigned int, or clone's flags, which the
// kernel truncates with lower_32_bits).
type Check struct {
	Arg  int // 0 to 5
	Mask uint32
	Op   Op
	Vals []uint32
}

// Holds reports whether the check holds for the argument value arg.
func (c Check) Holds(arg uint64) bool {
	v := uint32(arg) & c.Mask
	for _, want := range c.Vals {
		if v == want {
			return c.Op == In
		}
	}
	return c.Op == NotIn
}
