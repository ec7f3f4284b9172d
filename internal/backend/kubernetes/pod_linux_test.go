package kubernetes

import (
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// A sandbox Pod takes nothing from its node: no hostPath volume (the
// runtimes come in the image), no host namespaces.
func TestPodHasNoHostPath(t *testing.T) {
	b := &Backend{opt: Options{Namespace: "default", Image: ImageRepository + ":0123456789abcdef0123"}}
	p := b.pod("0123456789abcdef", kiln.DefaultLimits(), nil)
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
