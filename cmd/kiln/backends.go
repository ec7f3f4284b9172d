package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

const backendFlagHelp = "sandbox backend: native (kiln's own namespaces and cgroups; needs root) or docker (a container per sandbox on the local Docker engine; the environment image is built when missing, see kiln image build); kiln serve also takes kubernetes (a Pod per sandbox, in a kiln built with -tags kubernetes: see --kubeconfig)"

// addBackendFlag adds --backend to fs.
func addBackendFlag(fs *flag.FlagSet, name *string) {
	fs.StringVar(name, "backend", "native", backendFlagHelp)
}

// newBackend makes the backend a --backend flag names.
func newBackend(ctx context.Context, name string, log *slog.Logger) (engine.Backend, error) {
	switch name {
	case "", "native":
		return native.New(native.Config{}, log)
	case "docker":
		b, err := docker.New(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := dockerImage(ctx, b); err != nil {
			b.Close()
			return nil, err
		}
		return b, nil
	}
	return nil, kiln.Errorf(kiln.Invalid, "--backend %q: allowed are native and docker", name)
}

// dockerImage builds (or finds: the tag is the hash of its inputs) the
// environment image of this kiln binary and makes it b's image.
func dockerImage(ctx context.Context, b *docker.Backend) (built bool, err error) {
	exe, err := os.Executable()
	if err != nil {
		return false, kiln.Wrap(kiln.Internal, err, "cannot find kiln's own binary")
	}
	ref, built, err := b.FindImage(ctx, exe) // BuildImage, without hashing unchanged inputs again
	if err != nil {
		return false, err
	}
	b.SetImage(ref)
	return built, nil
}

// imageCmd is `kiln image build`.
func imageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kiln image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: kiln image build\n\nBuilds the Docker backend's environment image from this kiln binary and the host's /etc,\n"+
			"and imports it into the local Docker engine without any registry. The tag is the hash of\n"+
			"its inputs: building again unchanged does nothing. The host's /usr is mounted read-only\n"+
			"into each container, so every runtime the host has is there.\n")
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() != 1 || fs.Arg(0) != "build" {
		fs.Usage()
		return errUsage
	}
	b, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	exe, err := os.Executable()
	if err != nil {
		return kiln.Wrap(kiln.Internal, err, "cannot find kiln's own binary")
	}
	ref, built, err := b.BuildImage(ctx, exe)
	if err != nil {
		return err
	}
	if built {
		fmt.Fprintf(stdout, "built %s\n", ref)
	} else {
		fmt.Fprintf(stdout, "%s is up to date\n", ref)
	}
	return nil
}

// nameReplica gives a backend that labels sandboxes with their replica
// (Kubernetes) this replica's id before anything is made, the warm pool's
// Pods included: the other replicas destroy a gone replica's Pods by it.
func nameReplica(b engine.Backend, data string) error {
	r, ok := b.(interface{ SetReplica(string) })
	if !ok {
		return nil
	}
	id, err := service.ReplicaIDOf(data)
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "the replica id in %s", data)
	}
	r.SetReplica(id)
	return nil
}

// claimBackend makes b, for kiln serve on the data directory data, the
// owner of what it makes, and reaps what a crashed kiln serve on the same
// data directory left. The native backend needs nothing: its sandboxes
// die with the process that made them.
func claimBackend(ctx context.Context, b engine.Backend, data string, log *slog.Logger) error {
	// docker's and kubernetes's: their sandboxes outlive kiln serve
	d, ok := b.(interface {
		SetOwner(string)
		Reap(context.Context) (int, error)
	})
	if !ok {
		return nil
	}
	abs, err := filepath.Abs(data)
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "the data directory")
	}
	d.SetOwner(abs)
	n, err := d.Reap(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		log.Info("reaped the sandboxes a previous kiln serve left", "count", n)
	}
	return nil
}
