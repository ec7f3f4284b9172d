package main

import (
	"context"
	"flag"

	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// addDockerRuntimeFlag adds --docker-runtime to fs.
func addDockerRuntimeFlag(fs *flag.FlagSet, name *string) {
	fs.StringVar(name, "docker-runtime", "", "with --backend docker: the OCI runtime of every sandbox's container, such as runsc (gVisor; scripts/gvisor builds and registers it, kiln doctor says whether it runs here) or runc; empty: the engine's default")
}

// setDockerRuntime gives b the runtime --docker-runtime names; a runtime
// the engine has not registered, or one with another backend, is refused
// before kiln serves.
func setDockerRuntime(ctx context.Context, b engine.Backend, name string) error {
	if name == "" {
		return nil
	}
	d, ok := b.(*docker.Backend)
	if !ok {
		return kiln.Errorf(kiln.Invalid, "--docker-runtime %q needs --backend docker", name)
	}
	return d.SetRuntime(ctx, name)
}
