package spawn

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/seccomp"
)

// RlimitArg is argv[1] of the rlimit stage, which an agent without
// isolation (a container's) puts before user programs so that they get
// the rlimits a native spawn stage sets, and the agent keeps its own:
// argv[2] and argv[3] are the open files and file size, argv[4:] the
// program (an absolute path) and its arguments.
//
// RlimitConfineArg is the same stage that also confines the program
// further, for a container that is not the whole of the isolation (a
// Pod's):
//   - it loads kiln's seccomp filter, the one a native spawn stage loads,
//     just before the exec: the Pod's RuntimeDefault profile lets ptrace,
//     the foreign system call ABIs and more through. The filter is the
//     user program's alone; the agent, which loads none, keeps the calls
//     it needs;
//   - it runs the program under SCHED_IDLE, below the agent, which shares
//     the container's CPU quota with it: however many busy processes
//     user code makes (up to the node's pids limit per Pod, not the
//     session's), the agent, woken to end them, preempts them at once
//     rather than waiting its turn among them. The policy
//     weighs only within the container's cgroup, so the program loses
//     nothing against other sandboxes, and nothing while the agent is
//     idle; an unprivileged process cannot leave it (RLIMIT_NICE is 0).
const (
	RlimitArg        = "__kiln-rlimits"
	RlimitConfineArg = "__kiln-rlimits-confine"
)

// RlimitArgv is argv run through the rlimit stage of the binary at self,
// confined further when confine is set (RlimitConfineArg).
func RlimitArgv(self string, openFiles, fileSize int64, confine bool, argv []string) []string {
	arg := RlimitArg
	if confine {
		arg = RlimitConfineArg
	}
	return append([]string{self, arg, strconv.FormatInt(openFiles, 10), strconv.FormatInt(fileSize, 10)}, argv...)
}

// RlimitMain sets the rlimits and execs the program in place; it returns
// only by exiting with ExitSetupFailed.
func RlimitMain() {
	err := rlimitExec(os.Args)
	fmt.Fprintf(os.Stderr, "kiln: %v\n", err)
	os.Exit(ExitSetupFailed)
}

func rlimitExec(args []string) error {
	if len(args) < 5 {
		return fmt.Errorf("rlimit stage: want open files, file size and a program, got %q", args[1:])
	}
	var cfg Config
	var err error
	if cfg.OpenFiles, err = strconv.ParseInt(args[2], 10, 64); err != nil || cfg.OpenFiles <= 0 {
		return fmt.Errorf("rlimit stage: open files %q is not a positive number", args[2])
	}
	if cfg.FileSize, err = strconv.ParseInt(args[3], 10, 64); err != nil || cfg.FileSize <= 0 {
		return fmt.Errorf("rlimit stage: file size %q is not a positive number", args[3])
	}
	if err := setRlimits(cfg); err != nil {
		return err
	}
	if args[1] == RlimitConfineArg {
		// The policy and the filter are this thread's, which then
		// execs: the new program inherits both, the other threads end.
		runtime.LockOSThread()
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
			return fmt.Errorf("rlimit stage: lower the priority: %w", err)
		}
		disableSpeculation()
		if err := seccomp.Install(); err != nil {
			return fmt.Errorf("rlimit stage: %w", err)
		}
	}
	return unix.Exec(args[4], args[4:], os.Environ())
}
