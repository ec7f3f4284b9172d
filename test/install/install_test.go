// Package install_test checks how kiln is installed and run as a daemon:
// scripts/install, and the systemd unit in dist/systemd with its
// hardening. It needs root.
package install_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const unitFile = "../../dist/systemd/kiln.service"

var kilnBin string

// base is a directory for the tests' binaries and data outside /tmp and
// /var/tmp, which the unit's PrivateTmp hides from kiln.
var base string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("skipping: these tests need root to run kiln serve")
		os.Exit(m.Run())
	}
	var err error
	if base, err = os.MkdirTemp("/var/lib", "kiln-install-test-"); err != nil {
		panic(err)
	}
	os.Chmod(base, 0o711)
	kilnBin = filepath.Join(base, "kiln")
	build := exec.Command("go", "build", "-o", kilnBin, "../../cmd/kiln")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Printf("build kiln: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(base)
	os.Exit(code)
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// dataDir is a fresh directory under base, removed (workspaces first) at
// the end of the test.
func dataDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp(base, "data-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o711)
	t.Cleanup(func() { removeData(t, d) })
	return d
}

// removeData unmounts what is left under d and removes it; a test that
// passed left nothing mounted.
func removeData(t *testing.T, d string) {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], d+"/") {
			exec.Command("umount", "-l", f[4]).Run()
		}
	}
	os.RemoveAll(d)
}

// freePort is a local port that nothing listens on just now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// unitService reads the [Service] section of the unit: key, value pairs in
// order.
func unitService(t *testing.T) [][2]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kv [][2]string
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("unit: %q is not key=value", line)
			}
			kv = append(kv, [2]string{k, v})
		}
	}
	return kv
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
