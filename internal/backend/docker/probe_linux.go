package docker

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/moby/moby/client"
)

// Engine is what kiln doctor reports of the local Docker engine.
type Engine struct {
	Err            error // nil when the engine answers
	Version        string
	Runtimes       []string // registered OCI runtimes, sorted
	DefaultRuntime string
	// RuntimePaths are the registered runtimes' binaries, where the
	// engine names one (runc-compatible runtimes such as runsc).
	RuntimePaths map[string]string
}

// Probe asks the engine named by the environment what it is, within a
// few seconds.
func Probe(ctx context.Context) Engine {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := New(ctx)
	if err != nil {
		return Engine{Err: err}
	}
	defer b.Close()
	info, err := b.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return Engine{Err: err}
	}
	paths := map[string]string{}
	for name, r := range info.Info.Runtimes {
		if r.Path != "" {
			paths[name] = r.Path
		}
	}
	return Engine{
		RuntimePaths:   paths,
		Version:        info.Info.ServerVersion,
		Runtimes:       slices.Sorted(maps.Keys(info.Info.Runtimes)),
		DefaultRuntime: info.Info.DefaultRuntime,
	}
}
