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

	"github.com/kiln-dev/kiln/client"
)

// TestSharedSessionInTwoBrowsers runs web/test/share.mjs: two browsers
// signed in as two users; A shares a session with B as a collaborator,
// each sees the other's cells appear live with who ran them, and after A
// revokes, B gets 404.
func TestSharedSessionInTwoBrowsers(t *testing.T) {
	web := need(t)
	bin := kilnBin
	url, key := startServe(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	admin, err := client.New(url, key)
	if err != nil {
		t.Fatal(err)
	}
	var keys [2]string
	var userB string
	for i, name := range []string{"ada", "bob"} {
		u, err := admin.CreateUser(ctx, client.UserRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		k, err := admin.CreateKey(ctx, u.ID, "browser")
		if err != nil {
			t.Fatal(err)
		}
		keys[i], userB = k.Secret, u.ID
	}

	shots, _ := filepath.Abs("screenshots")
	cmd := exec.CommandContext(ctx, "node", "test/share.mjs")
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "KILN_URL="+url, "KILN_KEY_A="+keys[0], "KILN_KEY_B="+keys[1], "KILN_USER_B="+userB,
		"KILN_SCREENSHOTS="+shots, "CHROMIUM="+chromium)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	t.Logf("browser script:\n%s", out.String())
	if err != nil {
		t.Fatalf("the shared-session browser script failed: %v (see its output above; screenshots in %s)", err, shots)
	}
	if !strings.Contains(out.String(), "SHARED OK") {
		t.Fatal("the browser script did not finish")
	}
}
