package browser_test

import (
	"os"
	"path/filepath"
	"testing"
)

// firefoxESR is Debian's Firefox, which puppeteer-core drives over
// WebDriver BiDi (Playwright's Firefox is a patched build of its own that
// only its CDN has).
const firefoxESR = "/usr/bin/firefox-esr"

// TestFirefoxSmoke runs web/test/firefox.mjs in firefox-esr: sign in,
// create a session, a Python cell that prints, a matplotlib plot with a
// non-zero size and a markdown cell that renders. In CI (scripts/test
// with CI=true) its skip fails the run, as every skip does.
func TestFirefoxSmoke(t *testing.T) {
	if _, err := os.Stat(firefoxESR); err != nil {
		t.Skipf("needs Debian's firefox-esr at %s (scripts/deps --test installs it)", firefoxESR)
	}
	if _, err := os.Stat(filepath.Join("..", "..", "web", "node_modules", "puppeteer-core")); err != nil {
		t.Skip("needs puppeteer-core in web/node_modules (scripts/deps runs npm ci in web/)")
	}
	t.Setenv("FIREFOX", firefoxESR)
	runScript(t, "firefox.mjs", "FIREFOX OK")
}
