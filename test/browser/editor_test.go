package browser_test

import (
	"os"
	"testing"
)

// TestEditorInBrowser runs web/test/editor.mjs: Tab and Ctrl+Space in a
// Python cell offer the kernel's completions, and the format button runs
// black and gofmt in the session's sandbox.
func TestEditorInBrowser(t *testing.T) {
	for _, bin := range []string{"/usr/bin/black", "/usr/local/go/bin/gofmt"} {
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("needs %s (scripts/deps installs Debian's black and Go)", bin)
		}
	}
	runScript(t, "editor.mjs", "EDITOR OK")
}
