//go:build kubernetes

package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kiln-dev/kiln/internal/backend/kubernetes"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

var _ engine.Backend = (*kubernetes.Backend)(nil)

// newKubernetesBackend connects to the cluster; without --k8s-image it
// builds the runtimes image of this binary and imports it into the
// node's containerd (a no-op when it is there), for Pods that never pull.
func newKubernetesBackend(ctx context.Context, k kubernetesFlags, log *slog.Logger) (engine.Backend, error) {
	opt := kubernetes.Options{Namespace: k.namespace, Image: k.image, RuntimeClassName: k.runtimeClass, ExtendedResources: k.extended,
		Workspace: k.workspace, StorageClass: k.storageClass, WarmPods: k.warmPods, WarmLimits: k.warmLimits}
	if opt.Image == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, kiln.Wrap(kiln.Internal, err, "cannot find kiln's own binary")
		}
		t0 := time.Now()
		ref, built, err := kubernetes.BuildImage(ctx, kubernetes.ImageConfig{Agent: exe, Containerd: k.containerd})
		if err != nil {
			return nil, err
		}
		log.Info("runtimes image", "ref", ref, "imported", built, "took", time.Since(t0).Round(time.Millisecond))
		opt.Image, opt.PullPolicy = ref, corev1.PullNever
	}
	return kubernetes.New(ctx, k.kubeconfig, opt)
}
