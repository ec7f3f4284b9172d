//go:build linux

package security

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// The restrictions must not break ordinary programs. Each program below
// uses threads, subprocesses, temporary files, signals, loopback TCP,
// workspace files and the harmless devices, and prints what it saw.

const compatPython = `
import multiprocessing, os, signal, socket, subprocess, tempfile, threading

out = []
threads = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]
for th in threads:
    th.start()
for th in threads:
    th.join()
print("threads", sorted(out) == list(range(8)))

print("subprocess", subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout.strip())
print("shell pipeline", subprocess.run("echo abc | tr a-z A-Z", shell=True, capture_output=True, text=True).stdout.strip())

fd, path = tempfile.mkstemp()
os.write(fd, b"data")
os.close(fd)
print("mkstemp", os.path.dirname(path), open(path).read())
with tempfile.TemporaryDirectory() as d:
    print("mkdtemp", os.path.isdir(d))

got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append("USR1"))
signal.signal(signal.SIGTERM, lambda s, f: got.append("TERM"))
os.kill(os.getpid(), signal.SIGUSR1)
os.kill(os.getpid(), signal.SIGTERM)
print("own handlers", got)
child = subprocess.Popen(["sleep", "30"])
os.kill(child.pid, signal.SIGTERM)
print("kill child", child.wait())

srv = socket.create_server(("127.0.0.1", 0))
def serve():
    c, _ = srv.accept()
    c.sendall(c.recv(16).upper())
    c.close()
threading.Thread(target=serve).start()
with socket.create_connection(srv.getsockname(), timeout=3) as c:
    c.sendall(b"ping")
    print("loopback", c.recv(16).decode())

with open("/workspace/data.txt", "w") as f:
    f.write("saved")
print("workspace", open("data.txt").read(), os.getcwd())
print("dev", repr(open("/dev/null").read()), len(open("/dev/urandom", "rb").read(32)))
print("cpu_count", os.cpu_count() >= 1)

def square(x):
    return x * x
if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        print("pool", pool.map(square, [1, 2, 3]))
        # Let the workers finish before the with block ends, as users do:
        # its exit is Pool.terminate, which relies on SIGTERM killing the
        # workers, and these forked workers inherited the TERM handler
        # above, which does not exit. A worker still waiting for the
        # queue lock that terminate holds then never ends, and terminate
        # waits for it for ever: so on any Linux, not only in kiln (seen
        # in about a quarter of runs on a loaded host).
        pool.close()
        pool.join()
`

const compatNode = `
const cp = require("child_process"), fs = require("fs"), net = require("net"), os = require("os"), path = require("path");
const { Worker } = require("worker_threads");
const results = [];
const say = (...a) => results.push(a.join(" "));

say("execSync", cp.execSync("echo abc | tr a-z A-Z").toString().trim());
const d = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-"));
fs.writeFileSync(path.join(d, "f"), "data");
say("mkdtemp", path.dirname(d), fs.readFileSync(path.join(d, "f"), "utf8"));
fs.writeFileSync("/workspace/data.txt", "saved");
say("workspace", fs.readFileSync("data.txt", "utf8"), process.cwd());
const rnd = fs.openSync("/dev/urandom", "r");
say("dev", JSON.stringify(fs.readFileSync("/dev/null", "utf8")), fs.readSync(rnd, Buffer.alloc(32)));
say("cpus", os.cpus().length >= 1);

const tasks = [
  new Promise(r => { process.once("SIGUSR1", () => { say("own handler USR1"); r(); }); process.kill(process.pid, "SIGUSR1"); }),
  new Promise(r => { const c = cp.spawn("sleep", ["30"]); c.on("exit", (code, sig) => { say("kill child", sig); r(); }); c.kill("SIGTERM"); }),
  new Promise(r => { const w = new Worker("require('worker_threads').parentPort.postMessage(6 * 7)", { eval: true }); w.on("message", m => { say("worker", m); w.terminate().then(r); }); }),
  new Promise(r => {
    const srv = net.createServer(c => c.on("data", b => c.end(String(b).toUpperCase())));
    srv.listen(0, "127.0.0.1", () => {
      const c = net.connect(srv.address().port, "127.0.0.1", () => c.write("ping"));
      c.on("data", b => { say("loopback", String(b)); srv.close(); r(); });
    });
  }),
];
Promise.all(tasks).then(() => { for (const l of results.sort()) console.log(l); });
`

const compatBash = `
echo "pipeline $(echo abc | tr a-z A-Z | rev)"
n=$(ls /workspace | wc -l); echo "substitution $n"
f=$(mktemp); echo data > "$f"; echo "mktemp $(dirname "$f") $(cat "$f")"
d=$(mktemp -d); [ -d "$d" ] && echo "mktemp -d ok"
trap 'echo "own handler USR1"' USR1; kill -USR1 $$
trap 'echo "own handler TERM"' TERM; kill -TERM $$
sleep 30 & kill -TERM $!; wait $!; echo "kill child $?"
(sleep 0.1; echo "background done") & wait
echo saved > /workspace/data.txt; echo "workspace $(cat data.txt) $PWD"
echo "dev $(wc -c < /dev/null) $(head -c 32 /dev/urandom | wc -c)"
[ "$(nproc)" -ge 1 ] && echo "nproc ok"
echo "id $(id -u) $(id -un) $(whoami)"
`

// TestCompatibility: ordinary programs behave as they would anywhere.
func TestCompatibility(t *testing.T) {
	env(t)
	for _, tc := range []struct {
		language, code string
		want           []string
		sorted         bool
	}{
		{"python", compatPython, []string{
			"threads True",
			"subprocess hi",
			"shell pipeline ABC",
			"mkstemp /tmp data",
			"mkdtemp True",
			"own handlers ['USR1', 'TERM']",
			"kill child -15",
			"loopback PING",
			"workspace saved /workspace",
			"dev '' 32",
			"cpu_count True",
			"pool [1, 4, 9]",
		}, false},
		{"node", compatNode, []string{
			"cpus true",
			`dev "" 32`,
			"execSync ABC",
			"kill child SIGTERM",
			"loopback PING",
			"mkdtemp /tmp data",
			"own handler USR1",
			"worker 42",
			"workspace saved /workspace",
		}, true},
		{"bash", compatBash, []string{
			"pipeline CBA",
			"substitution 1",
			"mktemp /tmp data",
			"mktemp -d ok",
			"own handler USR1",
			"own handler TERM",
			"kill child 143",
			"background done",
			"workspace saved /workspace",
			"dev 0 32",
			"nproc ok",
			"id " + sandboxUID + " user user",
		}, false},
	} {
		t.Run(tc.language, func(t *testing.T) {
			// Generous: on a loaded 2-core machine the python case (a process
			// pool, pipelines) has taken 20 s.
			res := attack(t, tc.language, tc.code, kiln.Limits{Timeout: 90 * time.Second})
			got := lines(res.Stdout)
			if tc.sorted {
				slices.Sort(tc.want)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || res.Exit.Code != 0 {
				t.Errorf("an ordinary %s program misbehaves in the sandbox (-want +got):\n%s\n%v", tc.language, diff, res)
			}
		})
	}
}
