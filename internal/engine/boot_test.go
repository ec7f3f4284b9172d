package engine

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestKernelCommandLines: in the sandbox, no kernel carries its source on
// its command line (ps would print pages of it): each kernel's, read from
// inside it, is short, and the kernel works.
func TestKernelCommandLines(t *testing.T) {
	s := newSession(t, kiln.Limits{})
	for _, c := range []struct{ lang, code string }{
		{"python", "print(len(open('/proc/self/cmdline', 'rb').read()))"},
		{"javascript", "console.log(require('fs').readFileSync('/proc/self/cmdline').length)"},
		{"bash", "wc -c < /proc/$PPID/cmdline"}, // the shell's parent: the driver
	} {
		r := runCell(t, s, c.lang, c.code)
		n, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
		if r.Status != kiln.StatusOK || err != nil {
			t.Fatalf("%s: %+v", c.lang, r)
		}
		if n >= 256 {
			t.Errorf("the %s kernel's command line is %d bytes, want under 256", c.lang, n)
		}
	}
}
