package browser_test

import "testing"

// TestSessionListInBrowser runs web/test/sessions.mjs: a session is
// renamed from the session list (the new name shows after a reload, a
// name over 100 characters is refused with the server's reason), and the
// list shows its workspace's disk use and when its idle time-out ends.
func TestSessionListInBrowser(t *testing.T) {
	runScript(t, "sessions.mjs", "SESSIONS OK")
}
