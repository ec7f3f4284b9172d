//go:build !kubernetes || !linux

package main

import (
	"context"
	"log/slog"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// newKubernetesBackend: the default build leaves client-go out. Every
// sandbox process is this binary, and client-go's package init would
// add milliseconds to each one's start.
func newKubernetesBackend(context.Context, kubernetesFlags, *slog.Logger) (engine.Backend, error) {
	return nil, kiln.Errorf(kiln.Unsupported, "this kiln was built without the Kubernetes backend: build it with go build -tags kubernetes ./cmd/kiln (Linux only)")
}
