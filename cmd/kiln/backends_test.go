package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

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
	out, err = exec.Command(kilnBin, "image", "build").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "is up to date") {
		t.Errorf("a second kiln image build: %v\n%s; want it up to date", err, out)
	}
	out, err = exec.Command(kilnBin, "run", "--backend", "docker", "-l", "python", "-c", "import os; print(1+1, os.getuid())").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "2 1199000000" {
		t.Errorf("kiln run --backend docker: %v\n%s; want 2 and the sandbox's uid", err, out)
	}
}
