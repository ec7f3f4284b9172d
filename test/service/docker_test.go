package service_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// The service tests run on the backend KILN_TEST_BACKEND names: native
// (the default) or docker, for which every kiln serve they start gets
// --backend docker. scripts/test runs them once on each.
var onDocker = os.Getenv("KILN_TEST_BACKEND") == "docker"

// backendArgs are the kiln serve flags of the chosen backend.
func backendArgs() []string {
	if onDocker {
		return []string{"--backend", "docker"}
	}
	return nil
}

// ourOwners are the data directories of the servers the tests started:
// on Docker each labels its containers with it (dev.kiln.owner).
var ourOwners sync.Map

// dockerContainer is one kiln container on the engine.
type dockerContainer struct {
	id, owner string
	running   bool
}

// kilnContainers lists the containers of every kiln on the engine, by
// kiln's label, stopped ones too.
func kilnContainers(t *testing.T) []dockerContainer {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "dev.kiln.backend=docker")})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	var out []dockerContainer
	for _, c := range res.Items {
		out = append(out, dockerContainer{id: c.ID[:12], owner: c.Labels["dev.kiln.owner"], running: c.State == container.StateRunning})
	}
	return out
}

// removeDockerContainers removes, on Docker, the containers of the server
// on data (its owner label), as a restart on data would reap them.
func removeDockerContainers(t *testing.T, data string) {
	if !onDocker {
		return
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Error(err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range kilnContainers(t) {
		if c.owner != data {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Errorf("remove the container %s of the killed server on %s: %v", c.id, data, err)
		}
	}
}

// dockerSandboxes lists the containers of the servers the tests started;
// with runningOnly, those that still run.
func dockerSandboxes(t *testing.T, runningOnly bool) []string {
	t.Helper()
	var out []string
	for _, c := range kilnContainers(t) {
		if _, ours := ourOwners.Load(c.owner); ours && (c.running || !runningOnly) {
			out = append(out, "container "+c.id)
		}
	}
	return out
}

// dockerPool waits until the server on data holds n containers, and
// returns them.
func dockerPool(t *testing.T, data string, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var ids []string
		for _, c := range kilnContainers(t) {
			if c.owner == data {
				ids = append(ids, "container "+c.id)
			}
		}
		if len(ids) >= n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool did not fill: %d containers after 60 s", len(ids))
		}
	}
}

// waitNothingRuns waits until no sandbox of the tests' servers runs. On
// native that is waitNoSandboxes. On Docker, the containers of a server
// that was killed stop (their agents see the service's end) but stay
// until a server on the same data directory reaps them at its start: the
// test's last waitNoSandboxes, after that restart, finds them gone.
func waitNothingRuns(t *testing.T, why string) {
	t.Helper()
	if !onDocker {
		waitNoSandboxes(t, why)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(dockerSandboxes(t, true)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := dockerSandboxes(t, true); len(left) > 0 {
		t.Errorf("%s: containers still running: %v", why, left)
	}
}
