package browser_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTerminalInBrowser runs web/test/terminal.mjs: the Terminal button
// opens an xterm.js tab on a shell in the session's sandbox, a typed
// command's output appears with a /dev/pts terminal, a smaller window
// gives the shell a smaller stty size, and exit ends it.
func TestTerminalInBrowser(t *testing.T) {
	web := need(t)
	bin := kilnBin
	url, key := startServe(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	shots, _ := filepath.Abs("screenshots")
	cmd := exec.CommandContext(ctx, "node", "test/terminal.mjs")
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "KILN_URL="+url, "KILN_KEY="+key, "KILN_SCREENSHOTS="+shots, "CHROMIUM="+chromium)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	t.Logf("browser script:\n%s", out.String())
	if err != nil {
		t.Fatalf("the terminal browser script failed: %v (see its output above; screenshots in %s)", err, shots)
	}
	if !strings.Contains(out.String(), "TERMINAL OK") {
		t.Fatal("the browser script did not finish")
	}
}
