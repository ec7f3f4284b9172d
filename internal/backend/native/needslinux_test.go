package native

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// On macOS or Windows every sandbox command (run, repl, serve, doctor,
// bench) answers this; the builds for those systems are checked by
// scripts/test, this checks what the user reads.
func TestNeedsLinuxSaysWhatToDo(t *testing.T) {
	err := NeedsLinux("darwin")
	if kiln.KindOf(err) != kiln.Unsupported {
		t.Errorf("kind %v, want unsupported", kiln.KindOf(err))
	}
	msg := kiln.Message(err)
	for _, want := range []string{"sandboxes need Linux", "darwin", "kiln serve", "session", "exec", "files", "repl --server", "KILN_SERVER"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}
