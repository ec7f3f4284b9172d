package docker

import (
	"bytes"
	"context"
	"fmt"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Image is the environment image of new sandboxes ("" before SetImage or
// BuildImage).
func (b *Backend) Image() string { return b.image }

// PlainRun runs argv in a plain container of the environment image with
// the host's /usr, as `docker run --rm --network none -v /usr:/usr:ro
// --entrypoint argv[0] IMAGE argv[1:]` would: create, attach, start,
// wait, remove, nothing ahead of time and none of kiln's hardening. It is
// kiln bench's baseline on a host without the docker CLI, and returns
// what the program wrote to stdout (its first 8 KiB).
func (b *Backend) PlainRun(ctx context.Context, argv []string) (string, error) {
	if b.image == "" || len(argv) == 0 {
		return "", kiln.Errorf(kiln.Invalid, "a plain run needs the image and a command")
	}
	created, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Image: b.image,
		Config: &container.Config{
			Entrypoint: argv[:1], Cmd: argv[1:], AttachStdout: true, AttachStderr: true,
			Labels: map[string]string{labelBackend + ".plain": "true"},
		},
		HostConfig: &container.HostConfig{NetworkMode: "none",
			Mounts: []mount.Mount{{Type: mount.TypeBind, Source: "/usr", Target: "/usr", ReadOnly: true}}},
	})
	if err != nil {
		return "", kiln.Wrap(kiln.SandboxError, err, "cannot create the container")
	}
	defer b.cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true})
	att, err := b.cli.ContainerAttach(ctx, created.ID, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return "", kiln.Wrap(kiln.SandboxError, err, "cannot attach to the container")
	}
	defer att.Close()
	wait := b.cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := b.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return "", kiln.Wrap(kiln.SandboxError, err, "cannot start the container")
	}
	var out, errOut limitedBuffer
	if _, err := stdcopy.StdCopy(&out, &errOut, att.Reader); err != nil {
		return "", kiln.Wrap(kiln.SandboxError, err, "cannot read the container's output")
	}
	select {
	case res := <-wait.Result:
		if res.StatusCode != 0 {
			return out.String(), fmt.Errorf("exit status %d: %s", res.StatusCode, bytes.TrimSpace([]byte(errOut.String())))
		}
	case err := <-wait.Error:
		return out.String(), kiln.Wrap(kiln.SandboxError, err, "cannot wait for the container")
	}
	return out.String(), nil
}
