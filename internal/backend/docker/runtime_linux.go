package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// SetRuntime chooses the OCI runtime of new containers (kiln serve
// --docker-runtime): "runsc" for gVisor, "runc", or any other the engine
// has registered. Empty means the engine's default. A name the engine
// does not know is refused here, at start-up, rather than at the first
// sandbox.
func (b *Backend) SetRuntime(ctx context.Context, name string) error {
	if name == "" {
		b.runtime = ""
		return nil
	}
	info, err := b.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return kiln.Wrap(kiln.SandboxError, err, "cannot ask the Docker engine for its runtimes")
	}
	if _, ok := info.Info.Runtimes[name]; !ok {
		return kiln.Errorf(kiln.Invalid, "the Docker runtime %q is not registered with this engine; it has: %s (scripts/gvisor registers runsc)",
			name, strings.Join(slices.Sorted(maps.Keys(info.Info.Runtimes)), " "))
	}
	b.runtime = name
	return nil
}

// Runtime is the OCI runtime of new containers; empty: the engine's default.
func (b *Backend) Runtime() string { return b.runtime }

// trialRepository holds the image of TryRuntime's container: an empty
// root with the merged-/usr links, whose /usr is the host's, bound
// read-only as in every sandbox.
const trialRepository = "kiln-trial"

// TryRuntime runs one short container under the named runtime, as a
// sandbox is run (no network, read-only root, no capabilities, kiln's
// uid, the host's /usr read-only), and returns what `uname -r` printed in
// it: under gVisor, gVisor's own kernel version. The error, when it does
// not run, is the engine's or the runtime's own words. It takes at most
// a minute; a runtime that hangs (gVisor's KVM platform does on these
// machines) is reported as such.
func TryRuntime(ctx context.Context, runtime string) (kernel string, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b, err := New(ctx)
	if err != nil {
		return "", err
	}
	defer b.Close()
	ref, err := b.trialImage(ctx)
	if err != nil {
		return "", err
	}
	id := "trial-" + newID()
	created, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:  "kiln-" + id,
		Image: ref,
		Config: &container.Config{
			Cmd:    []string{"/usr/bin/uname", "-r"},
			User:   fmt.Sprintf("%d:%d", UID, UID),
			Labels: b.labels(id), // so that reaping finds it if this process dies here
		},
		HostConfig: &container.HostConfig{
			Runtime:        runtime,
			NetworkMode:    "none",
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			Mounts:         []mount.Mount{{Type: mount.TypeBind, Source: "/usr", Target: "/usr", ReadOnly: true}},
		},
	})
	if err != nil {
		return "", fmt.Errorf("creating a container under %s: %w", runtime, err)
	}
	defer func() {
		// A fresh context: the trial's may be spent. Removal of a hung
		// runtime's container can hang too; it is bounded.
		rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		b.remove(rctx, created.ID)
	}()
	wait := b.cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := b.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("a container under %s did not start within a minute (the runtime hangs here): %w", runtime, err)
		}
		return "", fmt.Errorf("starting a container under %s: %w", runtime, err)
	}
	var status int64
	select {
	case r := <-wait.Result:
		if r.Error != nil {
			return "", fmt.Errorf("waiting for the container under %s: %s", runtime, r.Error.Message)
		}
		status = r.StatusCode
	case err := <-wait.Error:
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return "", fmt.Errorf("a container under %s did not finish `uname -r` within a minute (the runtime hangs here)", runtime)
		}
		return "", fmt.Errorf("waiting for the container under %s: %w", runtime, err)
	}
	out, errOut := b.trialLogs(ctx, created.ID)
	if status != 0 {
		return "", fmt.Errorf("`uname -r` in a container under %s exited %d: %s", runtime, status, strings.TrimSpace(errOut+out))
	}
	return strings.TrimSpace(out), nil
}

// trialLogs returns what the trial container wrote (the first 4 KiB of each).
func (b *Backend) trialLogs(ctx context.Context, id string) (stdout, stderr string) {
	rc, err := b.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", "(no logs: " + err.Error() + ")"
	}
	defer rc.Close()
	var o, e bytes.Buffer
	stdcopy.StdCopy(&o, &e, io.LimitReader(rc, 64<<10))
	return limit(o.String()), limit(e.String())
}

func limit(s string) string {
	if len(s) > 4096 {
		return s[:4096] + "..."
	}
	return s
}

// trialImage imports the trial image unless it is there: a few empty
// directories and links, tagged by their hash, so importing is once.
func (b *Backend) trialImage(ctx context.Context) (string, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr/", "tmp/", "proc/", "dev/", "sys/", "etc/"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch})
	}
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: l, Linkname: "usr/" + l, Mode: 0o777, ModTime: epoch})
	}
	tw.Close()
	sum := sha256.Sum256(buf.Bytes())
	ref := trialRepository + ":" + hex.EncodeToString(sum[:])[:20]
	if _, err := b.cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", kiln.Wrap(kiln.SandboxError, err, "cannot inspect the trial image")
	}
	rc, err := b.cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{`LABEL ` + labelBackend + `=docker`}})
	if err != nil {
		return "", kiln.Wrap(kiln.SandboxError, err, "cannot import the trial image into the engine")
	}
	defer rc.Close()
	msg, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
	if bytes.Contains(msg, []byte(`"error"`)) {
		return "", kiln.Errorf(kiln.SandboxError, "the engine refused the trial image: %s", bytes.TrimSpace(msg))
	}
	return ref, nil
}
