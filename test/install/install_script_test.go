package install_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
)

// install runs scripts/install with everything it makes moved under dir,
// in the fallback mode (no systemd), and returns its output. It must
// return: the README's next command runs in the same shell.
func install(ctx context.Context, t *testing.T, dir, listen string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../scripts/install", args...)
	cmd.Env = append(os.Environ(),
		"KILN_INIT=background",
		"KILN_BIN_DIR="+filepath.Join(dir, "bin"),
		"KILN_DATA="+filepath.Join(dir, "data"),
		"KILN_LISTEN="+listen,
		"KILN_DEFAULTS="+filepath.Join(dir, "default"),
		"KILN_LOG="+filepath.Join(dir, "kiln.log"),
		"KILN_PIDFILE="+filepath.Join(dir, "kiln.pid"),
	)
	// The server it starts must not hold the test's pipes: Output would
	// wait for it.
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("scripts/install did not return within 10 minutes (a server left in the foreground?):\n%s", out)
	}
	if err != nil {
		t.Fatalf("scripts/install: %v\n%s", err, out)
	}
	return string(out)
}

// serverPid reads the pid file and checks that it names a running kiln
// serve.
func serverPid(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kiln.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %q", b)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), "serve") {
		t.Fatalf("the pid file names %d, which is not a running kiln serve (%q, %v)", pid, cmdline, err)
	}
	return pid
}

// waitGone waits for pid to end.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; syscall.Kill(pid, 0) == nil; i++ {
		if i == 600 {
			t.Fatalf("kiln serve %d is still running", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestInstallRunsInBackground: where systemd is not PID 1, scripts/install
// returns with kiln serve running in the background (pid file, log file,
// the admin key and how to stop it printed); run again, it upgrades: a
// new server on the same data, arguments kept for kiln serve.
func TestInstallRunsInBackground(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("builds kiln and runs scripts/deps")
	}
	ctx := ctxT(t, 25*time.Minute)
	dir := dataDir(t)
	listen := freePort(t)
	t.Cleanup(func() { // a server a failed test left running
		if b, err := os.ReadFile(filepath.Join(dir, "kiln.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cmdline), "serve") {
					syscall.Kill(pid, syscall.SIGKILL)
					waitGone(t, pid)
				}
			}
		}
	})

	out := install(ctx, t, dir, listen)
	pid := serverPid(t, dir)
	keyFile := filepath.Join(dir, "data", "admin.key")
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("no admin key file: %v\n%s", err, out)
	}
	for _, want := range []string{strings.TrimSpace(string(key)), "Stop:     kill $(cat " + filepath.Join(dir, "kiln.pid") + ")", filepath.Join(dir, "kiln.log")} {
		if !strings.Contains(out, want) {
			t.Errorf("scripts/install did not print %q:\n%s", want, out)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "kiln.log")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log file: %v, %v; want mode 0600 (it holds the first admin key)", fi, err)
	}
	c, err := client.New("http://"+listen, strings.TrimSpace(string(key)))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}

	// Upgrade, with an argument for kiln serve.
	out = install(ctx, t, dir, listen, "--pool", "0")
	waitGone(t, pid)
	pid2 := serverPid(t, dir)
	if pid2 == pid {
		t.Errorf("scripts/install run again kept the old server %d", pid)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "default")); !strings.Contains(string(b), `KILN_ARGS="--pool 0"`) {
		t.Errorf("the arguments were not kept for the next start: %q", b)
	}
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid2)); !strings.Contains(string(cmdline), "--pool\x000") {
		t.Errorf("the new server did not get the arguments: %q", cmdline)
	}
	if got, err := c.Session(ctx, sess.ID); err != nil || got.Status != "active" {
		t.Errorf("after the upgrade the session is %+v, %v; want it active", got, err)
	}
	c.DeleteSession(ctx, sess.ID)

	// Stop it as the output says.
	stop := exec.Command("bash", "-c", "kill $(cat "+filepath.Join(dir, "kiln.pid")+")")
	if out, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("the stop command: %v\n%s", err, out)
	}
	waitGone(t, pid2)
	if resp, err := http.Get("http://" + listen + "/v1/health/live"); err == nil {
		resp.Body.Close()
		t.Error("the server still answers after the stop command")
	}
}
