package browser_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildOut  []byte
)

// kilnBinary builds kiln once for the tests of this package that share it.
func kilnBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kiln-browser-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "kiln")
		build := exec.Command("go", "build", "-o", builtBin, "../../cmd/kiln")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = build.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build kiln: %v\n%s", buildErr, buildOut)
	}
	return builtBin
}

// runScript runs web/test/<script> against a kiln serve of its own and
// fails unless the script exits 0 and prints done.
func runScript(t *testing.T, script, done string) string {
	t.Helper()
	web := need(t)
	url, key := startServe(t, kilnBinary(t))
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
