// Package browser_test drives the web notebook in a real browser:
// web/test/browser.mjs (playwright-core, from web/node_modules) runs
// Debian's chromium against a real `kiln serve` that this test starts, and
// checks what a user would see. It saves screenshots of the main screens
// under test/browser/screenshots and prints the page-load and cell-latency
// medians (docs/PERFORMANCE.md).
package browser_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/test/testkiln"
)

const chromium = "/usr/bin/chromium"

// need skips the test, saying why, when something it needs is missing.
func need(t *testing.T) (web string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: kiln serve makes sandboxes")
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("needs Debian's chromium at %s (scripts/deps --test installs it)", chromium)
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import nbformat").Run(); err != nil {
		t.Skip("needs Jupyter's nbformat for Debian's python3, to check an exported notebook (scripts/deps --test installs python3-nbformat)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("needs Node.js (scripts/deps installs it)")
	}
	web, err := filepath.Abs("../../web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules/playwright-core")); err != nil {
		t.Skip("needs web/node_modules (scripts/deps runs npm ci in web/)")
	}
	if _, err := os.Stat(filepath.Join(web, "dist/ui/index.html")); err != nil {
		t.Skip("needs the built notebook, web/dist/ui (npm run build in web/; scripts/test does it)")
	}
	return web
}

// TestNotebookInBrowser runs web/test/browser.mjs: sign in, a session,
// Python, a plot, a DataFrame, JavaScript, upload, download, markdown,
// interrupt, input(), sandboxed HTML, files, restart, reload, an .ipynb
// round trip and sign-out.
func TestNotebookInBrowser(t *testing.T) {
	web := need(t)
	bin := kilnBin
	url, key := startServe(t, bin)

	shots, _ := filepath.Abs("screenshots")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "test/browser.mjs")
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "KILN_URL="+url, "KILN_KEY="+key, "KILN_SCREENSHOTS="+shots, "CHROMIUM="+chromium)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	t.Logf("browser script:\n%s", out.String())
	if err != nil {
		t.Fatalf("the browser script failed: %v (see its output above; screenshots in %s)", err, shots)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "RESULTS ") {
			fmt.Println("notebook measurements:", strings.TrimPrefix(l, "RESULTS "))
			return
		}
	}
	t.Fatal("the browser script printed no RESULTS line")
}

// startServe starts kiln serve on a free port with its own data directory
// and returns its URL and the admin key made for it.
func startServe(t *testing.T, bin string) (url, key string) {
	t.Helper()
	s := testkiln.Start(t, testkiln.Options{Bin: bin})
	return s.URL, s.Key
}
