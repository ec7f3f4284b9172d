package native

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeProxy serves, on a unix socket in a directory the sandbox's uid can
// cross, a proxy that refuses everything as the egress proxy does under
// the policy "none", and counts what reached it.
func fakeProxy(t *testing.T) (sock string, hits func() int) {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	sock = filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	n := make(chan struct{}, 100)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n <- struct{}{}
		http.Error(w, `kiln: this session's network policy is "none"; `+r.Method+" "+r.Host+" refused", http.StatusForbidden)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock, func() int { return len(n) }
}

// TestEgressBridge: with an egress socket, user code reaches the proxy
// through the environment's HTTP_PROXY (the agent's loopback bridge) and
// sees its refusal; it cannot use the socket itself, has no DNS and no
// route anywhere.
func TestEgressBridge(t *testing.T) {
	sock, hits := fakeProxy(t)
	sb := newSandbox(t, Spec{EgressSocket: sock})

	out, info := run(t, sb, "/bin/sh", "-c", `curl -sS -w ' time=%{time_total}' http://example.com/`)
	if !strings.Contains(out, `network policy is "none"`) || info.Code != 0 {
		t.Errorf("curl through the proxy: exit %d, %q; want the proxy's refusal", info.Code, out)
	}
	if hits() != 1 {
		t.Errorf("the proxy saw %d requests, want 1", hits())
	}
	py := `
import os, socket, time, urllib.request, urllib.error
def timed(name, f):
    t = time.monotonic()
    try:
        f()
        print(name, "succeeded")
    except Exception as e:
        print(name, "failed:", type(e).__name__, e, "after %.2f s" % (time.monotonic() - t))
def http():
    try:
        urllib.request.urlopen("http://example.com/", timeout=10)
    except urllib.error.HTTPError as e:
        raise RuntimeError(e.code, e.read().decode()) from None
timed("http", http)
timed("https", lambda: urllib.request.urlopen("https://example.com/", timeout=10))
timed("dns", lambda: socket.getaddrinfo("example.com", 80))
timed("tcp", lambda: socket.create_connection(("93.184.215.14", 80), timeout=10))
def unix():
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/kiln/egress.sock")
timed("unix", unix)
print("env", os.environ.get("HTTPS_PROXY"), os.environ.get("PIP_INDEX_URL"))
`
	out, _ = run(t, sb, "/usr/bin/python3", "-c", py)
	for _, want := range []string{
		`http failed: RuntimeError (403, 'kiln: this session\'s network policy is "none"`,
		"https failed: URLError <urlopen error Tunnel connection failed: 403 Forbidden>",
		"dns failed: gaierror",
		"tcp failed: OSError [Errno 101] Network is unreachable",
		"unix failed: PermissionError",
		"env http://127.0.0.1:3128 http://127.0.0.1:3128/pypi/simple/",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("python in the sandbox said:\n%s\nwant a line with %q", out, want)
		}
	}
	// Each failure is at once: the proxy answers, and nothing waits for a
	// DNS server or a route. (2 s is the bound; it takes ms.)
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, " after "); i > 0 {
			var secs float64
			if _, err := fmt.Sscanf(line[i:], " after %f s", &secs); err == nil && secs > 2 {
				t.Errorf("too slow: %s", line)
			}
		}
	}
}

// TestNoEgressSocket: without a socket there is no proxy environment and
// no bridge, only the empty network namespace.
func TestNoEgressSocket(t *testing.T) {
	sb := newSandbox(t, Spec{})
	out, _ := run(t, sb, "/bin/sh", "-c", `echo "[$HTTP_PROXY]"; ls /run 2>&1 | head -1; curl -sS --max-time 5 http://127.0.0.1:3128/ 2>&1`)
	if !strings.HasPrefix(out, "[]\n") || !strings.Contains(out, "Failed to connect") {
		t.Errorf("a sandbox without an egress socket: %q; want no HTTP_PROXY and nothing on port 3128", out)
	}
}
