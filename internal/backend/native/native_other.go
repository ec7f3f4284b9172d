//go:build !linux

package native

import (
	"context"
	"log/slog"
	"runtime"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
)

// Off Linux there are no sandboxes: New and every method answer
// NeedsLinux, so that kiln builds for macOS and Windows, where its remote
// commands work. The names mirror native_linux.go and probe_linux.go.

// Config is the backend's host-side configuration (unused off Linux).
type Config struct {
	RuntimeDir string
	UIDBase    uint32
	Slots      int
	CgroupRoot string
}

// Backend is never made off Linux.
type Backend struct{}

// New answers that sandboxes need Linux.
func New(cfg Config, log *slog.Logger) (*Backend, error) { return nil, NeedsLinux(runtime.GOOS) }

func (b *Backend) CreateSandbox(ctx context.Context, spec backend.Spec) (backend.Sandbox, error) {
	return backend.Sandbox{}, NeedsLinux(runtime.GOOS)
}

func (b *Backend) Connect(ctx context.Context, id string) (*agentclient.Client, error) {
	return nil, NeedsLinux(runtime.GOOS)
}

func (b *Backend) DestroySandbox(ctx context.Context, id string) error { return nil }

func (b *Backend) List(ctx context.Context) ([]string, error) { return nil, nil }

func (b *Backend) Capabilities() backend.Capabilities { return backend.Capabilities{Name: "native"} }

// LandlockFull is the Landlock ABI with every right kiln asks for.
const LandlockFull = 6

// Probe is what this host offers for sandboxing: nothing, off Linux.
type Probe struct {
	Root        bool
	Arch        string
	Namespaces  map[string]bool
	MaxUserNS   int64
	Cgroups     string
	CgroupsErr  error
	Seccomp     bool
	SeccompWhy  string
	LandlockABI int
	Sysctls     []Sysctl
}

// Sysctl is a kernel setting (none off Linux).
type Sysctl struct {
	Name  string
	Value string
	Risky bool
	Note  string
}

// ProbeHost reports a host without any of the Linux features.
func ProbeHost() *Probe {
	err := NeedsLinux(runtime.GOOS)
	return &Probe{Arch: runtime.GOARCH, Namespaces: map[string]bool{}, MaxUserNS: -1, CgroupsErr: err, SeccompWhy: "not Linux"}
}

// Verdict answers that sandboxes need Linux.
func (p *Probe) Verdict() error { return NeedsLinux(runtime.GOOS) }

// ResolveMount answers that sandboxes need Linux.
func ResolveMount(roots []string, source string) (string, error) {
	return "", NeedsLinux(runtime.GOOS)
}
