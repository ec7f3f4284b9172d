// Package testkiln starts `kiln serve` for the end-to-end tests (test/...):
// a built kiln binary on a free port with its own data directory and admin
// key, stopped when the test ends.
package testkiln

import (
	"bufio"
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
)

// Options says how to start kiln serve.
type Options struct {
	// Bin is the kiln binary to run; required.
	Bin string
	// Data is the data directory; empty: a fresh one (t.TempDir, made 0711
	// with its parent so that sandboxes reach their workspaces). Starting
	// again on the same Data is a restart.
	Data string
	// Args are more kiln serve flags. They come after the defaults
	// (--listen 127.0.0.1:0, --data, --admin-key-file Data/admin.key,
	// --pool 0), so a flag given here wins.
	Args []string
}

// Server is a running kiln serve.
type Server struct {
	URL  string    // http://127.0.0.1:PORT
	Key  string    // the admin key it made
	Data string    // its data directory
	Cmd  *exec.Cmd // the process (Cmd.Process.Kill plays a crash)

	t        testing.TB
	mu       sync.Mutex
	logs     strings.Builder
	stopOnce sync.Once
}

var addrRE = regexp.MustCompile(`msg="kiln serving" addr=(\S+)`)

// Start runs kiln serve and waits until it listens (at most a minute),
// failing the test otherwise with the server's log. When the test ends the
// server is stopped (Stop) and the mounts below Data are detached:
// sessions' workspaces outlive a stop, by design, and the test's go with
// it.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Data == "" {
		o.Data = t.TempDir()
		os.Chmod(filepath.Dir(o.Data), 0o711)
		os.Chmod(o.Data, 0o711)
	}
	keyFile := filepath.Join(o.Data, "admin.key")
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data", o.Data, "--admin-key-file", keyFile, "--pool", "0"}, o.Args...)
	s := &Server{Data: o.Data, Cmd: exec.Command(o.Bin, args...), t: t}
	stderr, err := s.Cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.Cmd.Stdout = io.Discard
	if err := s.Cmd.Start(); err != nil {
		t.Fatalf("start kiln serve: %v", err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		s.Stop()
		unmountUnder(t, o.Data)
	})
	select {
	case addr := <-found:
		s.URL = "http://" + addr
	case <-time.After(60 * time.Second):
		s.Cmd.Process.Kill()
		t.Fatalf("kiln serve did not start within a minute:\n%s", s.Logs())
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s.Key = strings.TrimSpace(string(b))
	return s
}

// Logs is what the server has written to its stderr so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Stop ends the server with SIGTERM and waits for it; after 30 s it kills
// it and fails the test. Stopping twice, or a server that was killed, is
// fine.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.Cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.Cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			s.Cmd.Process.Kill()
			<-done
			s.t.Errorf("kiln serve did not stop within 30 s of SIGTERM:\n%s", s.Logs())
		}
	})
}
