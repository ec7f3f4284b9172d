package browser_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// npmReachable says whether the host's npm registry (read from its npm
// configuration, as kiln serve reads it) answers for is-number, so that
// the script also installs a real package; without it that part is
// skipped.
func npmReachable() bool {
	out, err := exec.Command("npm", "config", "get", "registry").Output()
	reg := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(reg, "http") {
		return false
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(strings.TrimSuffix(reg, "/") + "/is-number")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestNetworkInBrowser runs web/test/network.mjs: a session created with
// network none, a cell that tries the network and the denied egress line
// with the policy's reason under it, an install refused under none, and
// the owner's policy dialog (the server's refusal shown, then an
// allowlist set), and where the host's npm registry answers, an npm
// install with streamed output that a JavaScript cell then requires.
func TestNetworkInBrowser(t *testing.T) {
	web := need(t)
	bin := kilnBin
	url, key := startServe(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	shots, _ := filepath.Abs("screenshots")
	cmd := exec.CommandContext(ctx, "node", "test/network.mjs")
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "KILN_URL="+url, "KILN_KEY="+key, "KILN_SCREENSHOTS="+shots, "CHROMIUM="+chromium)
	if npmReachable() {
		cmd.Env = append(cmd.Env, "KILN_NPM=1")
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	t.Logf("browser script:\n%s", out.String())
	if err != nil {
		t.Fatalf("the network browser script failed: %v (see its output above; screenshots in %s)", err, shots)
	}
	if !strings.Contains(out.String(), "NETWORK OK") {
		t.Fatal("the browser script did not finish")
	}
}
