package install_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
)

// The unit's settings that are not hardening, and so need no emulation.
var plainSettings = map[string]bool{
	"Type": true, "EnvironmentFile": true, "ExecStart": true, "StandardOutput": true,
	"KillMode": true, "TimeoutStopSec": true, "Restart": true, "RestartSec": true,
}

// emulate turns the unit's hardening settings into what systemd would do
// to kiln: mounts in a mount namespace of its own (a shell prelude) and
// privileges (setpriv's arguments). A setting it does not know fails the
// test: a new option must be tried with kiln and emulated here first.
func emulate(t *testing.T, settings [][2]string) (prelude string, setpriv []string) {
	t.Helper()
	roBind := func(paths ...string) string {
		var b strings.Builder
		for _, p := range paths {
			b.WriteString("if [ -d " + p + " ]; then mount --bind " + p + " " + p + " && mount -o remount,bind,ro " + p + "; fi; ")
		}
		return b.String()
	}
	hide := func(paths ...string) string {
		var b strings.Builder
		for _, p := range paths {
			b.WriteString("if [ -d " + p + " ]; then mount -t tmpfs -o ro,mode=000 kiln-test-hidden " + p + "; fi; ")
		}
		return b.String()
	}
	for _, kv := range settings {
		k, v := kv[0], kv[1]
		switch {
		case plainSettings[k]:
		case k == "NoNewPrivileges" && v == "yes":
			setpriv = append(setpriv, "--no-new-privs")
		case k == "ProtectSystem" && v == "full":
			prelude += roBind("/usr", "/boot", "/efi", "/etc")
		case k == "ProtectHome" && v == "yes":
			prelude += hide("/home", "/root", "/run/user")
		case k == "PrivateTmp" && v == "yes":
			prelude += "mount -t tmpfs kiln-test-tmp /tmp; mount -t tmpfs kiln-test-tmp /var/tmp; "
		case k == "CapabilityBoundingSet":
			caps := []string{"-all"}
			for _, c := range strings.Fields(v) {
				caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
			}
			setpriv = append(setpriv, "--bounding-set", strings.Join(caps, ","))
		default:
			t.Fatalf("the unit sets %s=%s, which this test cannot emulate: try it with kiln, then add it here", k, v)
		}
	}
	return prelude, setpriv
}

// unitServer is kiln serve as the unit runs it: in a mount namespace of
// its own, with the unit's hardening.
type unitServer struct {
	cmd    *exec.Cmd
	addr   string
	logs   *syncBuffer
	exited chan struct{}
}

// syncBuffer is a log that the test reads while the server writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var addrRE = regexp.MustCompile(`msg="kiln serving" addr=(\S+)`)

func startUnit(t *testing.T, data string) *unitServer {
	t.Helper()
	prelude, setpriv := emulate(t, unitService(t))
	script := prelude + `exec setpriv ` + shellQuote(setpriv) + ` -- "$@"`
	cmd := exec.Command("unshare", "-m", "--propagation", "slave", "bash", "-c", script, "kiln",
		kilnBin, "serve", "--listen", "127.0.0.1:0", "--data", data, "--admin-key-file", filepath.Join(data, "admin.key"), "--pool", "0")
	s := &unitServer{cmd: cmd, logs: &syncBuffer{}, exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.Discard, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.logs.Write(append(sc.Bytes(), '\n'))
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() { cmd.Wait(); pw.Close(); close(s.exited) }()
	select {
	case s.addr = <-found:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("kiln serve under the unit's hardening did not start:\n%s", s.logs)
	}
	return s
}

// stop sends SIGTERM, as systemctl stop does, and waits.
func (s *unitServer) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		t.Errorf("kiln serve did not stop on SIGTERM")
	}
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// TestUnitHardening runs kiln serve with the unit's hardening as systemd
// would apply it, and checks what users need: a session runs cells in
// Python, JavaScript and C, its files survive a restart of the unit
// (whose mount namespace, and so the workspace's mount, ends with it),
// and deleting it leaves nothing in the data directory.
func TestUnitHardening(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 5*time.Minute)
	data := dataDir(t)
	srv := startUnit(t, data)
	key, err := os.ReadFile(filepath.Join(data, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New("http://"+srv.addr, strings.TrimSpace(string(key)))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.CreateSession(ctx, client.SessionRequest{Languages: []string{"python", "javascript", "c"}})
	if err != nil {
		t.Fatalf("create a session: %v\n%s", err, srv.logs)
	}
	if _, err := c.Upload(ctx, sess.ID, "keep.txt", strings.NewReader("still here"), true); err != nil {
		t.Fatal(err)
	}
	run := func(lang, code, want string) {
		t.Helper()
		e, err := c.Exec(ctx, sess.ID, client.ExecRequest{Language: lang, Code: code})
		if err != nil {
			t.Fatalf("%s cell: %v", lang, err)
		}
		if e.Result == nil || e.Result.Stdout != want {
			t.Errorf("%s cell: %+v, want stdout %q", lang, e.Result, want)
		}
	}
	run("python", "print(open('keep.txt').read())", "still here\n")
	run("javascript", "console.log(6*7)", "42\n")
	run("c", "#include <stdio.h>\nint main(void) { puts(\"42\"); }", "42\n")
	srv.stop(t)

	srv = startUnit(t, data)
	defer srv.stop(t)
	c, _ = client.New("http://"+srv.addr, strings.TrimSpace(string(key)))
	run("python", "print(open('keep.txt').read())", "still here\n")
	if err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(data, "workspaces")); len(left) != 0 {
		t.Errorf("the data directory keeps %v after the session was deleted", left)
	}
	srv.stop(t)
	if strings.Contains(srv.logs.String(), "level=ERROR") {
		t.Errorf("kiln logged errors under the unit's hardening:\n%s", srv.logs)
	}
}

// TestUnitVerify: systemd-analyze finds nothing wrong with the unit.
func TestUnitVerify(t *testing.T) {
	needRoot(t)
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("ExecStart=/usr/local/bin/kiln serve ")) {
		t.Fatal("the unit does not start /usr/local/bin/kiln serve, where scripts/install puts it")
	}
	// verify wants ExecStart's binary to exist: the one built here.
	dir := t.TempDir()
	p := filepath.Join(dir, "kiln.service")
	os.WriteFile(p, bytes.ReplaceAll(unit, []byte("/usr/local/bin/kiln"), []byte(kilnBin)), 0o644)
	out, err := exec.Command(analyze, "verify", p).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
