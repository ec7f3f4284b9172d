package docker

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// TestEgressSocket: a container with an egress socket reaches the proxy
// through HTTP_PROXY (the agent's loopback bridge to the bound socket)
// and nothing else: no DNS, no route.
func TestEgressSocket(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	sock := filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `kiln: this session's network policy is "none"; `+r.Host+" refused", http.StatusForbidden)
	})}
	go srv.Serve(ln)
	defer srv.Close()

	sb, err := b.CreateSandbox(ctx, backend.Spec{EgressSocket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer b.DestroySandbox(ctx, sb.ID)
	c, _ := b.Connect(ctx, sb.ID)
	py := `
import socket, urllib.request, urllib.error
try:
    urllib.request.urlopen("http://example.com/", timeout=10)
except urllib.error.HTTPError as e:
    print("http", e.code, e.read().decode().strip())
for name, f in [("dns", lambda: socket.getaddrinfo("example.com", 80)),
                ("tcp", lambda: socket.create_connection(("93.184.215.14", 80), timeout=10))]:
    try:
        f()
        print(name, "succeeded")
    except Exception as e:
        print(name, "failed:", type(e).__name__)
`
	var out bytes.Buffer
	if _, err := c.Exec(ctx, protocol.Exec{Argv: []string{"python3", "-c", py}, TimeoutMs: 30_000, OutputBytes: 1 << 16}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`http 403 kiln: this session's network policy is "none"; example.com refused`, "dns failed: gaierror", "tcp failed: OSError"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("python in the container said:\n%s\nwant a line with %q", out.String(), want)
		}
	}
}
