package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"

	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/bench"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// benchBackends measures native and Docker side by side, with a plain
// container of the environment image as the baseline: the docker CLI's
// docker run when it is installed (the thing users compare with), else
// the same create, start, wait and remove through the Engine API.
func benchBackends(ctx context.Context, name string, o bench.BackendsOptions, stdout, stderr io.Writer, log *slog.Logger) error {
	if name != "docker" {
		return kiln.Errorf(kiln.Invalid, "--backend %q: allowed are native and docker", name)
	}
	if o.Concurrency < 1 || o.PoolSize < 1 {
		return kiln.Errorf(kiln.Invalid, "--concurrency and --pool must be at least 1")
	}
	nb, err := native.New(native.Config{}, log)
	if err != nil {
		return err
	}
	db, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := dockerImage(ctx, db); err != nil {
		return err
	}
	// Labels what the benchmark makes, so that no kiln serve on the same
	// engine counts it as its own.
	db.SetOwner(fmt.Sprintf("kiln-bench-%d", os.Getpid()))
	argv := []string{"/usr/bin/python3", "-c", "print(1)"}
	if cli, err := exec.LookPath("docker"); err == nil {
		args := []string{"run", "--rm", "--network", "none", "-v", "/usr:/usr:ro", "--entrypoint", argv[0], db.Image()}
		args = append(args, argv[1:]...)
		o.PlainName = "docker run --rm --network none -v /usr:/usr:ro --entrypoint /usr/bin/python3 IMAGE -c 'print(1)'"
		o.Plain = func(ctx context.Context) (string, error) {
			out, err := exec.CommandContext(ctx, cli, args...).Output()
			return string(out), err
		}
	} else {
		o.PlainName = "the same plain container through the Engine API (no docker CLI)"
		o.Plain = func(ctx context.Context) (string, error) { return db.PlainRun(ctx, argv) }
	}
	fmt.Fprintf(stderr, "image %s; baseline: %s\n", db.Image(), strings.Join(argv, " "))
	r, err := bench.Backends(ctx, []bench.Named{{Name: "native", Engine: engine.New(nb, log)}, {Name: "docker", Engine: engine.New(db, log)}}, o, stderr)
	if err != nil {
		return err
	}
	r.Print(stdout)
	return nil
}
