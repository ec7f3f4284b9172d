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

	"github.com/kiln-dev/kiln/test/testkiln"
)

// kilnBin is the kiln binary that TestMain built for every test here.
var kilnBin string

func TestMain(m *testing.M) { os.Exit(testkiln.Main(m, "browser", &kilnBin)) }

// runScript runs web/test/<script> against a kiln serve of its own and
// fails unless the script exits 0 and prints done.
func runScript(t *testing.T, script, done string) string {
	t.Helper()
	web := need(t)
	url, key := startServe(t, kilnBin)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	shots, _ := filepath.Abs("screenshots")
	cmd := exec.CommandContext(ctx, "node", filepath.Join("test", script))
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "KILN_URL="+url, "KILN_KEY="+key, "KILN_SCREENSHOTS="+shots, "CHROMIUM="+chromium)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	t.Logf("browser script %s:\n%s", script, out.String())
	if err != nil {
		t.Fatalf("the browser script %s failed: %v (see its output above; screenshots in %s)", script, err, shots)
	}
	if !strings.Contains(out.String(), done) {
		t.Fatalf("the browser script %s did not finish (no %q)", script, done)
	}
	return out.String()
}
