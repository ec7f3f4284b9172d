package kubernetes

import (
	"context"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// A sandbox Pod takes nothing from its node: no hostPath volume (the
// runtimes come in the image), no host namespaces.
func TestPodHasNoHostPath(t *testing.T) {
	b := &Backend{opt: Options{Namespace: "default", Image: ImageRepository + ":0123456789abcdef0123"}}
	p := b.pod("0123456789abcdef", kiln.DefaultLimits(), nil, "", nil)
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %q is a hostPath of %s", v.Name, v.HostPath.Path)
		}
	}
	if s := p.Spec; s.HostNetwork || s.HostPID || s.HostIPC || s.HostUsers != nil && *s.HostUsers {
		t.Errorf("the Pod shares a host namespace: network %v, pid %v, ipc %v", s.HostNetwork, s.HostPID, s.HostIPC)
	}
	if got := p.Spec.Containers[0].Image; got != b.opt.Image {
		t.Errorf("image %q; want the runtimes image %q", got, b.opt.Image)
	}
}

// An unknown workspace kind is refused before any cluster is asked,
// naming the two there are.
func TestWorkspaceKindInvalid(t *testing.T) {
	_, err := New(context.Background(), "/nonexistent/kubeconfig", Options{Workspace: "nfs"})
	if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), `"nfs": want emptydir (the Pod's own) or pvc`) {
		t.Errorf("New with workspace nfs: %v; want invalid, naming emptydir and pvc", err)
	}
}

// With a PVC the workspace volume is the claim, still no hostPath.
func TestPodWorkspaceClaim(t *testing.T) {
	b := &Backend{opt: Options{Namespace: "default", Image: ImageRepository + ":0123456789abcdef0123", Workspace: WorkspacePVC}}
	p := b.pod("0123456789abcdef", kiln.DefaultLimits(), nil, "kiln-ws-x", nil)
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %q is a hostPath", v.Name)
		}
		if v.Name == "workspace" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "kiln-ws-x" || v.EmptyDir != nil) {
			t.Errorf("workspace volume %+v; want only the claim kiln-ws-x", v.VolumeSource)
		}
	}
}
