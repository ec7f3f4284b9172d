package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/backend/docker"
)

func TestBackendFlagUnknown(t *testing.T) {
	r := runCLI(t, "", "run", "--backend", "podman", "-l", "python", "-c", "print(1)")
	if r.code == 0 || !strings.Contains(r.stderr, `--backend "podman": allowed are native and docker`) {
		t.Errorf("exit %d, stderr %q; want a refusal naming the allowed backends", r.code, r.stderr)
	}
}

// needDocker skips without a reachable Docker engine (scripts/deps
// --test starts one in CI).
func needDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := docker.New(ctx)
	if err != nil {
		t.Skipf("no Docker engine is reachable: %v", err)
	}
	b.Close()
}

// kiln image build imports the image once; kiln run --backend docker
// runs in a container as the unprivileged sandbox user.
func TestDockerImageAndRun(t *testing.T) {
	needDocker(t)
	out, err := exec.Command(kilnBin, "image", "build").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kiln-env:") {
		t.Fatalf("kiln image build: %v\n%s", err, out)
	}
	t.Cleanup(func() { removeKilnImage() })
	out, err = exec.Command(kilnBin, "image", "build").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "is up to date") {
		t.Errorf("a second kiln image build: %v\n%s; want it up to date", err, out)
	}
	out, err = exec.Command(kilnBin, "run", "--backend", "docker", "-l", "python", "-c", "import os; print(1+1, os.getuid())").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "2 1199000000" {
		t.Errorf("kiln run --backend docker: %v\n%s; want 2 and the sandbox's uid", err, out)
	}
}

// After a SIGKILL of kiln serve --backend docker, the next kiln serve on
// the same data directory reaps the containers the first one left, and
// only those.
func TestDockerServeReapsAfterCrash(t *testing.T) {
	needRoot(t)
	needDocker(t)
	t.Cleanup(func() { removeKilnImage() })
	data := t.TempDir()
	// The workspace root must not be writable by others (as in test/service).
	os.Chmod(filepath.Dir(data), 0o711)
	os.Chmod(data, 0o711)
	// Runs after the servers are killed and before the directory goes: the
	// killed servers leave their workspaces mounted.
	t.Cleanup(func() {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], data+"/") {
				unix.Unmount(f[4], unix.MNT_DETACH)
			}
		}
	})
	owner := "dev.kiln.owner=" + data
	count := func() []string {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+owner).Output()
		if err != nil {
			t.Fatalf("docker ps: %v", err)
		}
		return strings.Fields(string(out))
	}
	serve := func() (*exec.Cmd, string, string) {
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
		cmd := exec.Command(kilnBin, "serve", "--backend", "docker", "--data", data, "--listen", addr, "--pool", "0", "--run-pool", "0")
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, addr, out.Name()
	}
	waitFor := func(what string, ok func() bool) {
		for deadline := time.Now().Add(90 * time.Second); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	first, addr, stdout := serve()
	key := ""
	waitFor("the admin key", func() bool {
		b, _ := os.ReadFile(stdout)
		key = regexp.MustCompile(`kiln_[A-Z0-9]+`).FindString(string(b))
		return key != ""
	})
	var sessionErr error
	waitFor("a session", func() bool {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/sessions", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			sessionErr = err
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK
	})
	_ = sessionErr
	if len(count()) == 0 {
		t.Fatal("a session on the Docker backend made no labelled container")
	}
	left := count()
	first.Process.Kill()
	first.Wait()
	if len(count()) == 0 {
		t.Fatal("the killed server's containers are gone already: the test shows nothing")
	}
	serve()
	waitFor("the left containers to be reaped", func() bool {
		now := count()
		for _, id := range left {
			if slices.Contains(now, id) {
				return false
			}
		}
		return true
	})
}

// removeKilnImage removes the environment image of the kiln under test:
// each build of kiln has its own tag, and test runs must not pile them up
// in the engine.
func removeKilnImage() {
	out, err := exec.Command(kilnBin, "image", "build").Output()
	if f := strings.Fields(string(out)); err == nil && len(f) > 0 {
		ref := f[0] // "KIND:TAG is up to date"
		if f[0] == "built" {
			ref = f[1]
		}
		exec.Command("docker", "rmi", "-f", ref).Run()
	}
}
