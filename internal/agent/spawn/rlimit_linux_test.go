package spawn

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/seccomp"
)

// The rlimit stage refuses a malformed command line with an error that
// names what was wrong, before it sets any limit or execs anything.
func TestRlimitStageBadArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"kiln", RlimitArg, "32", "1048576"}, "want open files, file size and a program"},
		{[]string{"kiln", RlimitArg, "many", "1048576", "/bin/true"}, `open files "many" is not a positive number`},
		{[]string{"kiln", RlimitArg, "0", "1048576", "/bin/true"}, `open files "0" is not a positive number`},
		{[]string{"kiln", RlimitArg, "32", "-1", "/bin/true"}, `file size "-1" is not a positive number`},
	} {
		err := rlimitExec(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rlimitExec(%q) = %v; want an error containing %q", tc.args[2:], err, tc.want)
		}
	}
	if got := RlimitArgv("/proc/self/exe", 32, 1<<20, false, []string{"/bin/sh", "-c", "x"}); strings.Join(got, " ") != "/proc/self/exe "+RlimitArg+" 32 1048576 /bin/sh -c x" {
		t.Errorf("RlimitArgv = %q", got)
	}
}

// TestMain runs the rlimit stage when the tests run this binary as one.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == RlimitArg || os.Args[1] == RlimitConfineArg) {
		RlimitMain()
	}
	os.Exit(m.Run())
}

// The confining rlimit stage (a Pod's) gives the program its rlimits,
// kiln's seccomp filter and SCHED_IDLE, and the plain one only the
// rlimits: what a program sees of itself, from /proc.
func TestRlimitStageConfines(t *testing.T) {
	if ok, why := seccomp.Supported(); !ok {
		t.Skip(why)
	}
	// Field 41 of /proc/self/stat is the scheduling policy (5: SCHED_IDLE).
	const probe = `read -r l < /proc/self/stat; set -- $l; echo policy ${41}; grep -E '^Seccomp:' /proc/self/status; ulimit -n`
	for _, tc := range []struct {
		confine bool
		want    string
	}{
		{false, "policy 0\nSeccomp:\t0\n64\n"},
		{true, "policy 5\nSeccomp:\t2\n64\n"},
	} {
		argv := RlimitArgv(os.Args[0], 64, 1<<20, tc.confine, []string{"/bin/sh", "-c", probe})
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil || string(out) != tc.want {
			t.Errorf("confine %v: %q (%v); want %q", tc.confine, out, err, tc.want)
		}
	}
}
