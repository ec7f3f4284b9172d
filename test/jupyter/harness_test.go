// Package jupyter_test drives a real `kiln serve` with Jupyter clients
// nobody here wrote: jupyter_client, Debian's notebook server with its
// gateway option pointed at kiln, and nbclient. It needs root (kiln
// makes sandboxes) and Debian's python3-jupyter-client, python3-notebook,
// python3-nbclient and python3-ipykernel (scripts/deps --test).
package jupyter_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/test/testkiln"
)

// python is Debian's interpreter, which has Debian's Jupyter packages
// (a python3 earlier on PATH, e.g. pyenv's, may not).
const python = "/usr/bin/python3"

var kilnBin string

func TestMain(m *testing.M) { os.Exit(testkiln.Main(m, "jupyter", &kilnBin)) }

// need skips the test unless it runs as root and Debian's Python has the
// modules, naming the package that brings what is missing.
func need(t *testing.T, modules map[string]string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: kiln serve makes sandboxes")
	}
	for mod, pkg := range modules {
		if err := exec.Command(python, "-c", "import "+mod).Run(); err != nil {
			t.Skipf("needs the Python module %s from Debian's %s (scripts/deps --test installs it): %v", mod, pkg, err)
		}
	}
}

// serve is a `kiln serve` process.
type serve struct {
	url, key string
}

// syncBuilder collects a child's output from its goroutines.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) WriteString(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(v)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs kiln serve (test/testkiln) on a free port with its own
// data directory and tmpfs workspaces; its log is shown when the test
// fails.
func startServe(t *testing.T) *serve {
	t.Helper()
	s := testkiln.Start(t, testkiln.Options{Bin: kilnBin,
		Args: []string{"--run-pool", "0", "--workspaces", "tmpfs", "--rate", "10000", "--burst", "10000"}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kiln serve's log:\n%s", s.Logs())
		}
	})
	return &serve{url: s.URL, key: s.Key}
}

// freePort is a TCP port nobody listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runPython runs a script of testdata with Debian's Python and returns
// its standard output; the test fails with both outputs when the
// script does.
func runPython(t *testing.T, timeout time.Duration, script string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", script)}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "JUPYTER_PLATFORM_DIRS=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s\n%s", script, err, out, stderr.String())
	}
	return string(out)
}
