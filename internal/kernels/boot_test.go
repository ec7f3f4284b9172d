package kernels

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kernels/kerneltest"
)

// TestBootCommandLine: started as the agent starts them (Spec.Boot), the
// kernels' command lines are short, carry none of their source, and the
// kernels work, arguments after the source (bash's init) included.
func TestBootCommandLine(t *testing.T) {
	for _, tc := range []struct {
		lang       string
		kernel     func() Spec
		code, want string
	}{
		{"python", Python, "import sys\nprint(1 + 1, sys.argv)", "2 ['']\n"},
		{"javascript", JavaScript, "console.log(1 + 1, typeof f, typeof r)", "2 undefined undefined\n"},
		{"typescript", TypeScript, "const n: number = 1 + 1; console.log(n)", "2\n"},
		{"bash", Bash, "echo $((1 + 1)); declare -F | grep -c __kiln_ >/dev/null && echo init", "2\ninit\n"},
		{"sql", SQL, "select 1 + 1 as two;", ""},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			spec := tc.kernel()
			if tc.lang == "typescript" {
				if _, err := os.Stat(typescriptDir + "/package.json"); err != nil {
					t.Skipf("the TypeScript compiler is not installed: %v", err)
				}
			}
			argv, payload := spec.Boot()
			if payload == "" || strings.Join(argv, "") == strings.Join(spec.Argv, "") {
				t.Fatalf("Boot left the source on the command line: %q", argv)
			}
			k := kerneltest.StartBoot(t, argv, spec.Env, payload, t.TempDir())
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k.Cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			if len(cmdline) >= 256 {
				t.Errorf("the command line is %d bytes, want under 256: %q", len(cmdline), cmdline)
			}
			r := k.Exec(tc.code)
			if r.Status != "ok" || r.Stdout != tc.want {
				t.Errorf("cell: status %s stdout %q (want %q) error %+v stderr %q", r.Status, r.Stdout, tc.want, r.Error, r.Stderr)
			}
			if tc.lang == "sql" && (len(r.Displays) == 0 || !strings.Contains(text(t, r.Displays[0]), "2")) {
				t.Errorf("sql: displays %+v", r.Displays)
			}
		})
	}
}
