package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/kiln-dev/kiln/test/testkiln"
)

// TestRunThroughServerSameAsLocal: kiln run through a kiln serve (POST
// /v1/run) prints the same stdout and stderr and exits with the same
// status as on the local engine, for argv, stdin, exit codes, errors,
// limits, files and --json.
func TestRunThroughServerSameAsLocal(t *testing.T) {
	needRoot(t)
	s := testkiln.Start(t, testkiln.Options{Bin: kilnBin})
	dir := workdir(t, map[string]string{
		"args.py":   "import sys\nprint('argv', sys.argv[1:])\nprint('stdin', input())\nsys.stderr.write('to stderr\\n')\nsys.exit(3)\n",
		"data.txt":  "from a file\n",
		"test_x.py": "def test_ok():\n    assert 1 + 1 == 2\n\ndef test_bad():\n    assert 1 + 1 == 3\n",
	})
	// No print beside the display: the local engine may interleave a
	// print and a display differently from the server (stdout and
	// displays reach the agent on different pipes), which is not what
	// this compares.
	png := "class Img:\n    def _repr_png_(self):\n        return b'\\x89PNG\\r\\n\\x1a\\nkiln'\ndisplay(Img())\n"
	tests := []struct {
		name  string
		stdin string
		args  []string
		save  bool // --save-outputs, a directory for each way
	}{
		{"python argv stdin exit", "a line\n", []string{"args.py", "one", "two words"}, false},
		{"python traceback", "", []string{"--lang", "python", "-c", "raise ValueError('boom')"}, false},
		{"bash argv and exit", "", []string{"--lang", "bash", "-c", `echo "$@"; exit 4`, "--", "x", "y"}, false},
		{"javascript exit", "", []string{"--lang", "js", "-c", "console.log('js'); process.exit(5)"}, false},
		{"timeout", "", []string{"--timeout", "1s", "--lang", "python", "-c", "import time; print('start', flush=True); time.sleep(10)"}, false},
		{"file", "", []string{"--file", "data.txt", "--lang", "python", "-c", "print(open('data.txt').read())"}, false},
		{"killed by a signal", "", []string{"--lang", "python", "-c", "import os; os.kill(os.getpid(), 9)"}, false},
		{"json", "", []string{"--json", "--lang", "python", "-c", "print(6*7)"}, false},
		{"program on stdin", "print('from stdin')\n", []string{"--lang", "python", "-"}, false},
		{"image saved", "", []string{"--lang", "python", "-c", png}, true},
		{"pytest", "", []string{"--test", "test_x.py"}, false},
		{"c with build options", "", []string{"--build-opt", "-O2 -DN=7", "--lang", "c", "-c", "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", N); return 2; }"}, false},
		{"a refused build option", "", []string{"--build-opt", "-fplugin=x.so", "--lang", "c", "-c", "int main(void) { return 0; }"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			localArgs, remoteArgs := []string{"run", "--local"}, []string{"run", "--server", s.URL}
			localDir, remoteDir := t.TempDir(), t.TempDir()
			if tt.save {
				localArgs = append(localArgs, "--save-outputs", localDir)
				remoteArgs = append(remoteArgs, "--save-outputs", remoteDir)
			}
			local := execKiln(t, invocation{dir: dir, stdin: []byte(tt.stdin)}, append(localArgs, tt.args...)...)
			remote := execKiln(t, invocation{dir: dir, stdin: []byte(tt.stdin), env: []string{"KILN_KEY=" + s.Key}},
				append(remoteArgs, tt.args...)...)
			if tt.save {
				local.stdout = strings.ReplaceAll(local.stdout, localDir, "DIR")
				remote.stdout = strings.ReplaceAll(remote.stdout, remoteDir, "DIR")
				if !strings.Contains(remote.stdout, "[image/png saved to DIR/output-1.png]") {
					t.Errorf("through the server the image was not saved: stdout %q", remote.stdout)
				}
			}
			for _, r := range []*result{&local, &remote} { // what differs between any two runs
				r.stdout = varies.ReplaceAllString(r.stdout, "X")
			}
			if tt.name == "json" { // usage and timing differ from run to run
				local.stdout, remote.stdout = jsonShape(t, local.stdout), jsonShape(t, remote.stdout)
			}
			if remote.stdout != local.stdout || remote.stderr != local.stderr || remote.code != local.code {
				t.Errorf("through the server: exit %d, stdout %q, stderr %q\nlocally: exit %d, stdout %q, stderr %q",
					remote.code, remote.stdout, remote.stderr, local.code, local.stdout, local.stderr)
			}
		})
	}
}

// varies is what pytest's output says differently in every run: its
// report's temporary file and its time.
var varies = regexp.MustCompile(`/tmp/\.kiln/tests/[0-9a-f]+/|in [0-9.]+s`)

// jsonShape keeps what the --json result says apart from usage figures.
func jsonShape(t *testing.T, out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "_ms") && !strings.Contains(l, "_bytes") && !strings.Contains(l, "wall") && !strings.Contains(l, "cpu") && !strings.Contains(l, "peak") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestRunFindsLocalServer: without --server, kiln run uses the loopback
// kiln serve of the client config file (and -v says so), runs locally
// when that port is closed, and keeps to the local engine for --local
// and --mount; --server with --mount is refused, saying why.
func TestRunFindsLocalServer(t *testing.T) {
	needRoot(t)
	s := testkiln.Start(t, testkiln.Options{Bin: kilnBin})
	config := func(server, key string) []string {
		xdg := t.TempDir()
		os.MkdirAll(filepath.Join(xdg, "kiln"), 0o700)
		b := fmt.Sprintf(`{"server": %q, "key": %q}`, server, key)
		if err := os.WriteFile(filepath.Join(xdg, "kiln", "client.json"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"XDG_CONFIG_HOME=" + xdg, "KILN_SERVER=", "KILN_KEY="}
	}
	closed := closedPort(t)
	mountDir := t.TempDir()
	tests := []struct {
		name      string
		env       []string
		args      []string
		wantWhere string
		stdin     []byte
	}{
		{"config's server", config(s.URL, s.Key), nil, "ran on the kiln serve at " + s.URL, nil},
		{"--local", config(s.URL, s.Key), []string{"--local"}, "ran on the local engine (--local)", nil},
		{"--mount", config(s.URL, s.Key), []string{"--mount", mountDir}, "ran on the local engine (--mount", nil},
		{"closed port", config(closed, "kiln_nokey"), nil, "ran on the local engine (no kiln serve listens on " + strings.TrimPrefix(closed, "http://"), nil},
		{"wrong key", config(s.URL, "kiln_wrong"), nil, "ran on the local engine (the server at " + s.URL + " did not run it", nil},
		{"binary stdin", config(s.URL, s.Key), nil, "ran on the local engine (stdin is not UTF-8", []byte{0xff, 0xfe, '\n'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"run", "-v"}, tt.args...), "--lang", "python", "-c", "print('same')")
			r := execKiln(t, invocation{env: tt.env, stdin: tt.stdin}, args...)
			if r.code != 0 || r.stdout != "same\n" {
				t.Errorf("exit %d, stdout %q, want 0 and %q; stderr %q", r.code, r.stdout, "same\n", r.stderr)
			}
			if !strings.Contains(r.stderr, "kiln: "+tt.wantWhere) {
				t.Errorf("stderr %q does not say %q", r.stderr, tt.wantWhere)
			}
		})
	}
	r := execKiln(t, invocation{env: []string{"KILN_KEY=" + s.Key}}, "run", "--server", s.URL, "--mount", mountDir, "--lang", "python", "-c", "print(1)")
	if r.code == 0 || !strings.Contains(r.stderr, "--mount shows a folder of this host") {
		t.Errorf("--server with --mount: exit %d, stderr %q; want a refusal naming --mount", r.code, r.stderr)
	}
}

// closedPort is a loopback URL nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestRunKeyOnlyToTrustedListener: a key kept by root is not sent to a
// loopback port that another user holds (one who bound kiln's port while
// kiln serve was down), and is to one root holds.
func TestRunKeyOnlyToTrustedListener(t *testing.T) {
	needRoot(t)
	keyFile := filepath.Join(t.TempDir(), "admin.key")
	if err := os.WriteFile(keyFile, []byte("kiln_secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ok, why := trustedLocal("http://"+ln.Addr().String(), keyFile); !ok {
		t.Errorf("a port root holds is not trusted: %s", why)
	}

	// A listener of uid 65534.
	cmd := exec.Command("/usr/bin/python3", "-c", "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(60)")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start python3 as uid 65534: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	port, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the uid 65534 listener did not say its port: %v", err)
	}
	url := "http://127.0.0.1:" + strings.TrimSpace(port)
	ok, why := trustedLocal(url, keyFile)
	if ok || !strings.Contains(why, "uid 65534") {
		t.Errorf("trustedLocal(%s) = %v, %q; want false naming uid 65534", url, ok, why)
	}
	if ok, _ := trustedLocal("http://192.0.2.1:8420", keyFile); ok {
		t.Error("a key would go to a server that is not on this host")
	}
}
