//go:build amd64 || arm64

package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Install sets no_new_privs and loads the filter on the calling thread. The
// caller has locked the OS thread and calls execve right after; the filter
// is not synchronised to the process's other threads. It fails if the
// kernel refuses the filter; see Supported.
func Install() error {
	raw, err := Program()
	if err != nil {
		return err
	}
	return Load(raw)
}

// Load is Install with a program compiled beforehand by Program, so that a
// caller can move the compilation off its critical path.
func Load(raw []bpf.RawInstruction) error {
	if len(raw) == 0 {
		return fmt.Errorf("seccomp: empty program")
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}

	// Without no_new_privs only CAP_SYS_ADMIN may load a filter, and a
	// setuid program could run with it.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp: load filter: %w", errno)
	}
	return nil
}

// Program returns the assembled filter for the running architecture.
func Program() ([]bpf.RawInstruction, error) {
	return compile(Rules, native)
}

// Supported reports whether this kernel accepts the filter Install loads,
// and why not when it does not.
func Supported() (bool, string) {
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return false, fmt.Sprintf("prctl(PR_GET_SECCOMP): %v: kernel built without CONFIG_SECCOMP", err)
	}
	// Every action the filter returns must be known to the kernel; an
	// unknown one would act as kill. KILL_PROCESS came in Linux 4.14.
	for _, a := range []Action{Allow, KillProcess, EPERM} {
		act := uint32(a) & retAction
		_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&act)))
		switch {
		case errno == unix.ENOSYS:
			return false, "no seccomp(2) system call (Linux 3.17 or later needed)"
		case errno != 0:
			return false, fmt.Sprintf("seccomp(SECCOMP_GET_ACTION_AVAIL, %#x): %v (Linux 4.14 or later needed)", act, errno)
		}
	}
	// A filter at address 0 fails with EFAULT only after the kernel has
	// accepted the mode, so this loads nothing. EINVAL means no
	// CONFIG_SECCOMP_FILTER; EPERM, say, an outer policy blocking seccomp.
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, 0)
	switch errno {
	case unix.EFAULT:
		return true, ""
	case unix.EINVAL:
		return false, "seccomp(SECCOMP_SET_MODE_FILTER): EINVAL: kernel built without CONFIG_SECCOMP_FILTER"
	default:
		return false, fmt.Sprintf("seccomp(SECCOMP_SET_MODE_FILTER) probe: got %v, want EFAULT", errno)
	}
}
