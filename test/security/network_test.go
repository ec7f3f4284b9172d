//go:build linux

package security

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Only these outside addresses are ever named, and in an empty network
// namespace nothing is sent to them: connect fails before any packet.
// Private ranges are never targeted.
const (
	cloudflareDNS = "1.1.1.1"
	googleDNS     = "8.8.8.8"
	metadataAddr  = "169.254.169.254"
)

// TestNoExternalNetwork: the sandbox has only a loopback interface, so
// every outside address, the cloud metadata service included, is
// unreachable at once.
func TestNoExternalNetwork(t *testing.T) {
	env(t)
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", py(`
import socket, time
def tcp(host, port):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.settimeout(3)
    s.connect((host, port))
def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"\0" * 12, (host, port))
start = time.time()
probe("tcp `+cloudflareDNS+`:80", tcp, "`+cloudflareDNS+`", 80)
probe("tcp `+googleDNS+`:53", tcp, "`+googleDNS+`", 53)
probe("udp `+googleDNS+`:53", udp, "`+googleDNS+`", 53)
probe("tcp `+metadataAddr+`:80", tcp, "`+metadataAddr+`", 80)
probe("tcp [2606:4700:4700::1111]:80", tcp, "2606:4700:4700::1111", 80)
print("fast", time.time() - start < 1)
print("interfaces", socket.if_nameindex())
`), kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res,
			"tcp "+cloudflareDNS+":80 ENETUNREACH",
			"tcp "+googleDNS+":53 ENETUNREACH",
			"udp "+googleDNS+":53 ENETUNREACH",
			"tcp "+metadataAddr+":80 ENETUNREACH",
			"tcp [2606:4700:4700::1111]:80 ENETUNREACH",
			"fast True",
			"interfaces [(1, 'lo')]",
		)
	})
	t.Run("node", func(t *testing.T) {
		res := attack(t, "node", `
const net = require("net");
const targets = [["`+cloudflareDNS+`", 80], ["`+googleDNS+`", 53], ["`+metadataAddr+`", 80]];
(async () => {
  for (const [host, port] of targets) {
    const code = await new Promise(resolve => {
      const s = net.connect(port, host, () => { resolve("connected"); s.destroy(); });
      s.on("error", e => resolve(e.code));
      s.setTimeout(3000, () => { resolve("timeout"); s.destroy(); });
    });
    console.log(host + ":" + port + " " + code);
  }
})();
`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res,
			cloudflareDNS+":80 ENETUNREACH",
			googleDNS+":53 ENETUNREACH",
			metadataAddr+":80 ENETUNREACH",
		)
	})
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", sh(`
probe "/dev/tcp/`+cloudflareDNS+`/80" bash -c 'exec 3<>/dev/tcp/`+cloudflareDNS+`/80'
probe "/dev/tcp/`+metadataAddr+`/80" bash -c 'exec 3<>/dev/tcp/`+metadataAddr+`/80'
curl -sS --max-time 3 http://`+metadataAddr+`/latest/meta-data/ 2>/dev/null; echo "curl metadata exit $?"
`), kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res,
			"/dev/tcp/"+cloudflareDNS+"/80 ENETUNREACH",
			"/dev/tcp/"+metadataAddr+"/80 ENETUNREACH",
			"curl metadata exit 7", // couldn't connect
		)
	})
}

// countingListener accepts and counts connections until closed.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func listen(t *testing.T, network, addr string) *countingListener {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	cl := &countingListener{Listener: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			cl.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		if n := cl.accepted.Load(); n > 0 {
			t.Errorf("the host's listener on %s %s accepted %d connections from the sandbox", network, addr, n)
		}
	})
	return cl
}

func port(l net.Listener) string {
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// TestHostLoopbackUnreachable: services the host runs on its own loopback
// are out of reach; the sandbox's 127.0.0.1 is its own.
func TestHostLoopbackUnreachable(t *testing.T) {
	env(t)
	v4 := listen(t, "tcp4", "127.0.0.1:0")
	v6 := listen(t, "tcp6", "[::1]:0")
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", py(`
import socket
def tcp(family, host, port):
    s = socket.socket(family)
    s.settimeout(3)
    s.connect((host, port))
probe("127.0.0.1", tcp, socket.AF_INET, "127.0.0.1", `+port(v4)+`)
probe("::1", tcp, socket.AF_INET6, "::1", `+port(v6)+`)
probe("localhost", tcp, socket.AF_INET, "localhost", `+port(v4)+`)
`), kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "127.0.0.1 ECONNREFUSED", "::1 ECONNREFUSED", "localhost ECONNREFUSED")
	})
	t.Run("node", func(t *testing.T) {
		res := attack(t, "node", `
const s = require("net").connect(`+port(v4)+`, "127.0.0.1", () => console.log("connected"));
s.on("error", e => console.log(e.code));
`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "ECONNREFUSED")
	})
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", sh(`probe "/dev/tcp/127.0.0.1" bash -c 'exec 3<>/dev/tcp/127.0.0.1/`+port(v4)+`'`), kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "/dev/tcp/127.0.0.1 ECONNREFUSED")
	})
}

// TestHostAbstractSocketUnreachable: abstract unix sockets belong to a
// network namespace; one the host listens on cannot be reached.
func TestHostAbstractSocketUnreachable(t *testing.T) {
	env(t)
	name := "kiln-security-" + randomHex(8)
	listen(t, "unix", "@"+name)
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", py(`
import socket
def connect(addr):
    socket.socket(socket.AF_UNIX).connect(addr)
probe("abstract", connect, "\0`+name+`")
print("listed", "@`+name+`" in open("/proc/net/unix").read())
`), kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "abstract ECONNREFUSED", "listed False")
	})
	t.Run("node", func(t *testing.T) {
		res := attack(t, "node", `
const s = require("net").connect({path: "\0`+name+`"}, () => console.log("connected"));
s.on("error", e => console.log(e.code));
`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "ECONNREFUSED")
	})
}

// TestDNSFailsCleanly: name resolution fails at once with the resolver's
// ordinary "try again" error, and localhost still resolves from /etc/hosts.
func TestDNSFailsCleanly(t *testing.T) {
	env(t)
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", `
import socket, time
start = time.time()
try:
    socket.getaddrinfo("example.com", 80)
    print("resolved")
except socket.gaierror as e:
    print("gaierror", e.errno == socket.EAI_AGAIN)
print("fast", time.time() - start < 2)
print("localhost", socket.gethostbyname("localhost"))
`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "gaierror True", "fast True", "localhost 127.0.0.1")
	})
	t.Run("node", func(t *testing.T) {
		res := attack(t, "node", `
const start = Date.now();
require("dns").lookup("example.com", (e) => console.log(e ? e.code : "resolved", Date.now() - start < 2000));
`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "EAI_AGAIN true")
	})
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", `getent hosts example.com; echo "getent exit $?"; getent hosts sandbox | tr -s ' '`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "getent exit 2", "127.0.1.1 sandbox")
	})
}

// TestLoopbackInsideWorks: programs may still talk to themselves over the
// sandbox's own loopback.
func TestLoopbackInsideWorks(t *testing.T) {
	env(t)
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", `
import socket, threading
srv = socket.create_server(("127.0.0.1", 0))
port = srv.getsockname()[1]
def serve():
    c, _ = srv.accept()
    c.sendall(b"echo: " + c.recv(100))
    c.close()
threading.Thread(target=serve).start()
with socket.create_connection(("127.0.0.1", port), timeout=3) as c:
    c.sendall(b"hello")
    print(c.recv(100).decode())
`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "echo: hello")
	})
	t.Run("node", func(t *testing.T) {
		res := attack(t, "node", `
const net = require("net");
const srv = net.createServer(c => c.on("data", d => { c.end("echo: " + d); }));
srv.listen(0, "127.0.0.1", () => {
  const c = net.connect(srv.address().port, "127.0.0.1", () => c.write("hello"));
  c.on("data", d => { console.log(String(d)); srv.close(); });
});
`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, "echo: hello")
	})
}
