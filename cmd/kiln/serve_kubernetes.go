package main

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// kubernetesFlags are kiln serve's flags of the Kubernetes backend
// (--backend kubernetes, in a kiln built with -tags kubernetes).
type kubernetesFlags struct {
	kubeconfig, namespace, image, containerd, runtimeClass string
	workspace, storageClass                                string
	warmPods                                               int
	warmLimits                                             kiln.Limits // the service's default limits (parseServe)
	// extended: the extended resources (GPUs) a session may ask for,
	// name → the most per session (0: no bound but the nodes').
	extended resourceList
}

func addKubernetesFlags(fs *flag.FlagSet, k *kubernetesFlags) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "with --backend kubernetes: the kubeconfig `file` of the cluster (empty: the in-cluster configuration of kiln's own Pod)")
	fs.StringVar(&k.namespace, "namespace", "default", "with --backend kubernetes: the `namespace` of the sandbox Pods")
	fs.StringVar(&k.image, "k8s-image", "", "with --backend kubernetes: the runtimes `image` the nodes pull; empty: kiln builds it from this binary and the host's /usr and imports it into --k8s-containerd")
	fs.StringVar(&k.containerd, "k8s-containerd", "/run/containerd/containerd.sock", "with --backend kubernetes and no --k8s-image: the node's containerd `socket` the runtimes image is imported into (single-node clusters)")
	fs.StringVar(&k.runtimeClass, "runtime-class", "", "with --backend kubernetes: the RuntimeClass `name` of sandbox Pods (gVisor, Kata); empty: the cluster's default")
	fs.StringVar(&k.workspace, "k8s-workspace", "emptydir", "with --backend kubernetes: where session workspaces live: emptydir (the Pod's: gone with the Pod) or pvc (a PersistentVolumeClaim per session, of --k8s-storage-class, sized by the workspace limit: it outlives Pods and kiln restarts, and goes once the session has ended)")
	fs.StringVar(&k.storageClass, "k8s-storage-class", "", "with --k8s-workspace pvc: the StorageClass `name` of workspace PVCs; empty: the cluster's default class")
	fs.IntVar(&k.warmPods, "k8s-warm-pods", 0, "with --backend kubernetes: sandbox Pods kept started ahead, with the --default-* limits; a sandbox asking for those limits (and no GPU, no PVC workspace) takes one in a few ms instead of a Pod's start; 0: none")
	fs.Var(&k.extended, "k8s-extended-resource", "with --backend kubernetes: an extended resource `NAME[=MAX]` (nvidia.com/gpu=2) a session may ask for, at most MAX (none: as many as a node has); repeat for more; none: sessions get no GPUs")
}

// resourceList is --k8s-extended-resource, repeated.
type resourceList map[string]int64

func (r *resourceList) Set(s string) error {
	name, max, err := backend.ParseResource(s)
	if err != nil {
		return err
	}
	if _, dup := (*r)[name]; dup {
		return kiln.Errorf(kiln.Invalid, "extended resource %s is given twice", name)
	}
	if *r == nil {
		*r = resourceList{}
	}
	(*r)[name] = max
	return nil
}

func (r *resourceList) String() string {
	if r == nil {
		return ""
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(*r)) {
		if max := (*r)[name]; max > 0 {
			name = fmt.Sprintf("%s=%d", name, max)
		}
		out = append(out, name)
	}
	return strings.Join(out, ",")
}
