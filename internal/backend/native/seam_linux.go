package native

import (
	"context"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// The engine's backend interface (engine.Backend) over Create: sandboxes
// by id, which this backend remembers until they are destroyed.

// CreateSandbox starts a sandbox and remembers it by id.
func (b *Backend) CreateSandbox(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	sb, err := b.Create(ctx, Spec{Limits: spec.Limits, Env: spec.Env, HostDir: spec.HostDir, Mounts: mounts(spec.Mounts),
		EgressSocket: spec.EgressSocket, BuildCache: spec.BuildCache})
	if err != nil {
		return backend.Sandbox{}, err
	}
	b.made.Add(sb.ID, sb)
	// Builds go to package programs' default area, on the private /tmp.
	out := backend.Sandbox{ID: sb.ID, Workspace: Workspace}
	if spec.BuildCache != "" {
		out.BuildCache = protocol.BuildCachePath
	}
	return out, nil
}

// Connect returns the client of the sandbox's agent: its one connection,
// made when the sandbox started.
func (b *Backend) Connect(ctx context.Context, id string) (*agentclient.Client, error) {
	sb, err := b.made.Get(id)
	if err != nil {
		return nil, err
	}
	return sb.Agent, nil
}

// DestroySandbox destroys a sandbox made by CreateSandbox; one that is
// already gone is not an error.
func (b *Backend) DestroySandbox(ctx context.Context, id string) error {
	return b.made.Destroy(id, func(sb *Sandbox) error { return sb.Destroy(ctx) })
}

// List returns the sandboxes made by CreateSandbox and not yet destroyed.
// Those of a kiln process that died are removed by New (CleanOrphans).
func (b *Backend) List(ctx context.Context) ([]string, error) {
	return b.made.List(), nil
}

// Capabilities: full isolation and cgroup limits; New refuses a host
// that cannot give both.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Name: "native", Isolation: true, Limits: true}
}

// mounts are the engine's read-only mounts in this backend's terms.
func mounts(ms []backend.Mount) []Mount {
	var out []Mount
	for _, m := range ms {
		out = append(out, Mount{Source: m.Source, Target: m.Target})
	}
	return out
}
