//go:build linux

// Command runtimes-image builds the runtimes image of the sandbox Pods
// from a kiln binary, as kiln serve --backend kubernetes does when it has
// no --k8s-image, imports it into a node's containerd and prints its
// reference. deploy/kubernetes/images runs it for a kiln server that
// runs in a Pod, which cannot build the image itself (it has neither the
// host's /usr nor the node's containerd).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/kiln-dev/kiln/internal/backend/kubernetes"
)

func main() {
	agent := flag.String("agent", "", "the kiln `binary` the sandbox Pods run (built with -tags kubernetes, as the server)")
	sock := flag.String("containerd", "/run/containerd/containerd.sock", "the node's containerd `socket`")
	flag.Parse()
	if *agent == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: runtimes-image --agent KILN_BINARY [--containerd SOCKET]")
		os.Exit(2)
	}
	ref, _, err := kubernetes.BuildImage(context.Background(), kubernetes.ImageConfig{Agent: *agent, Containerd: *sock})
	if err != nil {
		fmt.Fprintln(os.Stderr, "runtimes-image:", err)
		os.Exit(1)
	}
	fmt.Println(ref)
}
