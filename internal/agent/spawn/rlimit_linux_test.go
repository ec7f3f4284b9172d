package spawn

import (
	"strings"
	"testing"
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
	if got := RlimitArgv("/proc/self/exe", 32, 1<<20, []string{"/bin/sh", "-c", "x"}); strings.Join(got, " ") != "/proc/self/exe "+RlimitArg+" 32 1048576 /bin/sh -c x" {
		t.Errorf("RlimitArgv = %q", got)
	}
}
