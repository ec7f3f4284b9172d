// Package browser_test drives the web notebook in a real browser:
// web/test/browser.mjs (playwright-core, from web/node_modules) runs
// Debian's chromium against a real `kiln serve` that this test starts, and
// checks what a user would see. It saves screenshots of the main screens
// under test/browser/screenshots and prints the page-load and cell-latency
// medians (docs/PERFORMANCE.md).
package browser_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

const chromium = "/usr/bin/chromium"

var addrRE = regexp.MustCompile(`msg="kiln serving" addr=(\S+)`)

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
	dir := t.TempDir()
	bin := filepath.Join(dir, "kiln")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/kiln")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kiln: %v\n%s", err, out)
	}
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
	data := t.TempDir()
	os.Chmod(filepath.Dir(data), 0o711) // sandboxes reach their workspaces
	os.Chmod(data, 0o711)
	keyFile := filepath.Join(data, "admin.key")
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data", data, "--admin-key-file", keyFile, "--pool", "0")
	stderr, _ := cmd.StderrPipe()
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		cmd.Wait()
		unmountUnder(t, data) // sessions' workspaces outlive a stop, by design
	})
	select {
	case addr := <-found:
		url = "http://" + addr
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("kiln serve did not start")
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return url, strings.TrimSpace(string(b))
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	var points []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", points[i], err)
		}
	}
}
