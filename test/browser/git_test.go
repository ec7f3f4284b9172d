package browser_test

import (
	"os"
	"testing"
)

// TestGitPanelInBrowser runs web/test/git.mjs: the Git tab initialises
// the workspace as a repository, commits a file a cell wrote (the log
// shows it) and shows a later change in its diff view.
func TestGitPanelInBrowser(t *testing.T) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip("needs git (Debian's git package)")
	}
	runScript(t, "git.mjs", "GIT OK")
}
