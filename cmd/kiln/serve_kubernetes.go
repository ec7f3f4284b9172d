package main

import "flag"

// kubernetesFlags are kiln serve's flags of the Kubernetes backend
// (--backend kubernetes, in a kiln built with -tags kubernetes).
type kubernetesFlags struct {
	kubeconfig, namespace, image, containerd, runtimeClass string
}

func addKubernetesFlags(fs *flag.FlagSet, k *kubernetesFlags) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "with --backend kubernetes: the kubeconfig `file` of the cluster (empty: the in-cluster configuration of kiln's own Pod)")
	fs.StringVar(&k.namespace, "namespace", "default", "with --backend kubernetes: the `namespace` of the sandbox Pods")
	fs.StringVar(&k.image, "k8s-image", "", "with --backend kubernetes: the runtimes `image` the nodes pull; empty: kiln builds it from this binary and the host's /usr and imports it into --k8s-containerd")
	fs.StringVar(&k.containerd, "k8s-containerd", "/run/containerd/containerd.sock", "with --backend kubernetes and no --k8s-image: the node's containerd `socket` the runtimes image is imported into (single-node clusters)")
	fs.StringVar(&k.runtimeClass, "runtime-class", "", "with --backend kubernetes: the RuntimeClass `name` of sandbox Pods (gVisor, Kata); empty: the cluster's default")
}
