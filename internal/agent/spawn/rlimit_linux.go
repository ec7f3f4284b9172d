package spawn

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// RlimitArg is argv[1] of the rlimit stage, which an agent without
// isolation (a container's) puts before user programs so that they get
// the rlimits a native spawn stage sets, and the agent keeps its own:
// argv[2] and argv[3] are the open files and file size, argv[4:] the
// program (an absolute path) and its arguments.
const RlimitArg = "__kiln-rlimits"

// RlimitArgv is argv run through the rlimit stage of the binary at self.
func RlimitArgv(self string, openFiles, fileSize int64, argv []string) []string {
	return append([]string{self, RlimitArg, strconv.FormatInt(openFiles, 10), strconv.FormatInt(fileSize, 10)}, argv...)
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
	return unix.Exec(args[4], args[4:], os.Environ())
}
