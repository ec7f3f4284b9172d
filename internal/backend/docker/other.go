//go:build !linux

package docker

import (
	"context"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// Backend off Linux: the agent in the container is a Linux binary.
type Backend struct{}

func needsLinux() error {
	return kiln.Errorf(kiln.Unsupported, "the Docker backend runs only on Linux")
}

func New(context.Context) (*Backend, error) { return nil, needsLinux() }
func (b *Backend) SetImage(string)          {}
func (b *Backend) Image() string            { return "" }
func (b *Backend) PlainRun(context.Context, []string) (string, error) {
	return "", needsLinux()
}
func (b *Backend) Close() error    { return nil }
func (b *Backend) SetOwner(string) {}
func (b *Backend) SetRuntime(context.Context, string) error {
	return needsLinux()
}
func (b *Backend) Runtime() string { return "" }

// TryRuntime reports that the backend needs Linux.
func TryRuntime(context.Context, string) (string, error) { return "", needsLinux() }
func (b *Backend) Reap(context.Context) (int, error) {
	return 0, needsLinux()
}
func (b *Backend) BuildImage(context.Context, string) (string, bool, error) {
	return "", false, needsLinux()
}
func (b *Backend) FindImage(context.Context, string) (string, bool, error) {
	return "", false, needsLinux()
}
func (b *Backend) CreateSandbox(context.Context, backend.Spec) (backend.Sandbox, error) {
	return backend.Sandbox{}, needsLinux()
}
func (b *Backend) Connect(context.Context, string) (*agentclient.Client, error) {
	return nil, needsLinux()
}
func (b *Backend) DestroySandbox(context.Context, string) error { return needsLinux() }
func (b *Backend) List(context.Context) ([]string, error)       { return nil, needsLinux() }
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Name: "docker"}
}

// Engine is what kiln doctor reports of the local Docker engine.
type Engine struct {
	Err            error
	Version        string
	Runtimes       []string
	DefaultRuntime string
	RuntimePaths   map[string]string
}

// Probe reports that the backend needs Linux.
func Probe(context.Context) Engine { return Engine{Err: needsLinux()} }
