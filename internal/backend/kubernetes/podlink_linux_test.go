package kubernetes

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend/kubernetes/podlink"
)

// The bridge runs under the link container's small CPU quota, once per
// connection of a kiln replica: it dispatches before the packages it
// does not use are initialized (podlink), here those of client-go, which
// this test binary has as the kiln binary does.
func TestBridgeSkipsClientInits(t *testing.T) {
	ln, err := net.Listen("unix", podlink.AgentSocket)
	if err != nil {
		t.Fatalf("listening as the agent, on %s of this network namespace: %v", podlink.AgentSocket, err)
	}
	defer ln.Close()
	go acceptAndClose(ln)
	cmd := exec.Command(os.Args[0], BridgeArg)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the bridge: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "init" {
			continue
		}
		n++
		if strings.HasPrefix(f[1], "k8s.io/") || strings.HasPrefix(f[1], "github.com/kiln-dev/kiln/internal/agent") {
			t.Errorf("the bridge initialized %s, which it does not use", f[1])
		}
	}
	if n == 0 {
		t.Fatalf("no init in the bridge's trace:\n%s", out)
	}
}
