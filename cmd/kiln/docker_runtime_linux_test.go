package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/docker"
)

// --docker-runtime needs --backend docker, and names a runtime the engine
// has: otherwise kiln serve stops before serving, saying which.
func TestServeDockerRuntimeRefused(t *testing.T) {
	needRoot(t)
	r := runCLI(t, "", "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--docker-runtime", "runsc")
	if r.code == 0 || !strings.Contains(r.stderr, `--docker-runtime "runsc" needs --backend docker`) {
		t.Errorf("native with --docker-runtime: exit %d, stderr %q; want a refusal", r.code, r.stderr)
	}
	needDocker(t)
	r = runCLI(t, "", "serve", "--backend", "docker", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--docker-runtime", "no-such-runtime")
	if r.code == 0 || !strings.Contains(r.stderr, `"no-such-runtime" is not registered with this engine`) {
		t.Errorf("an unknown runtime: exit %d, stderr %q; want a refusal naming it", r.code, r.stderr)
	}
}

// kiln serve --backend docker --docker-runtime runsc runs code under
// gVisor: a one-shot run sees gVisor's kernel.
func TestServeDockerRuntimeGVisor(t *testing.T) {
	needRoot(t)
	needDocker(t)
	if kernel, err := docker.TryRuntime(t.Context(), "runsc"); err != nil {
		if e := docker.Probe(t.Context()); !strings.Contains(strings.Join(e.Runtimes, " "), "runsc") {
			t.Skipf("gVisor: runsc is not registered with this engine (runtimes %v); scripts/gvisor builds and registers it", e.Runtimes)
		}
		t.Fatalf("gVisor: runsc is registered but does not run a container here: %v", err)
	} else if !strings.Contains(kernel, "gvisor") {
		t.Fatalf("a container under runsc reports the kernel %q; want gVisor's", kernel)
	}
	t.Cleanup(func() { removeKilnImage() })
	data := t.TempDir()
	// The workspace root must not be writable by others (as in test/service).
	os.Chmod(filepath.Dir(data), 0o711)
	os.Chmod(data, 0o711)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kilnBin, "serve", "--backend", "docker", "--docker-runtime", "runsc",
		"--data", data, "--listen", addr, "--pool", "0", "--run-pool", "0")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// SIGTERM: the server unmounts its workspaces as it stops.
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	var body string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		log, _ := os.ReadFile(out.Name())
		if key := regexp.MustCompile(`kiln_[A-Z0-9]+`).FindString(string(log)); key != "" {
			req, _ := http.NewRequest("POST", "http://"+addr+"/v1/run", strings.NewReader(`{"language":"python","code":"import platform; print(platform.release())"}`))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if body = string(b); resp.StatusCode == http.StatusOK {
					break
				}
			}
		}
		select {
		case <-exited:
			t.Fatalf("kiln serve --docker-runtime runsc exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run through kiln serve --docker-runtime runsc within 90 s; last answer %q; server log:\n%s", body, log)
		}
	}
	if !strings.Contains(body, "gvisor") {
		t.Errorf("a run under kiln serve --docker-runtime runsc: %s; want gVisor's kernel in its output", body)
	}
}
