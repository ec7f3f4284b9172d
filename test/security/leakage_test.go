//go:build linux

package security

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// baseEnv is the allowlisted environment of every user program, reviewed
// here independently of native.BaseEnv.
var baseEnv = []string{
	"HOME=/workspace",
	"LANG=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"LOGNAME=user",
	// Go's toolchain lives in /usr/local/go (scripts/deps); first, the
	// session's own venv on its private /tmp, once a pip install makes it.
	"PATH=/tmp/.kiln/packages/python/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin",
	"SHELL=/bin/bash",
	"TERM=dumb",
	"TMPDIR=/tmp",
	"USER=user",
	"XDG_CACHE_HOME=/tmp/.cache",
}

// TestEnvironmentAllowlist: a program's environment is exactly the
// allowlist plus its language's own variables; nothing of the host's (the
// test sets KILN_SECRET_CANARY in its own) comes through.
func TestEnvironmentAllowlist(t *testing.T) {
	s := env(t)
	if os.Getenv(envCanaryName) != s.envSecret {
		t.Fatalf("the test's own %s is not set; the case would prove nothing", envCanaryName)
	}
	for _, tc := range []struct {
		language, code string
		extra          []string
	}{
		{"python", "import os\nfor k in sorted(os.environ): print(k + '=' + os.environ[k])", []string{"MPLBACKEND=Agg", "MPLCONFIGDIR=/tmp/matplotlib", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}},
		{"node", "for (const k of Object.keys(process.env).sort()) console.log(k + '=' + process.env[k]);", nil},
		// bash adds PWD, SHLVL and _ to what it exports; the environment it
		// was started with is in /proc.
		{"bash", `tr '\0' '\n' < /proc/$$/environ | LC_ALL=C sort`, nil},
	} {
		t.Run(tc.language, func(t *testing.T) {
			res := attack(t, tc.language, tc.code, quick)
			want := append(slices.Clone(baseEnv), tc.extra...)
			if s.onDocker() {
				// The Docker backend's PATH has no session venv first:
				// pip typed in a cell (issue 13) is native's so far.
				i := slices.Index(want, "PATH=/tmp/.kiln/packages/python/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin")
				want[i] = "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin"
				t.Log("held differently on Docker: PATH has no session venv (pip typed in a cell is native's so far)")
			}
			slices.Sort(want)
			if diff := cmp.Diff(want, lines(res.Stdout)); diff != "" {
				t.Errorf("the environment differs from the allowlist (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("agent environ", func(t *testing.T) {
		res := attack(t, "python", py(`probe("read /proc/1/environ", lambda: open("/proc/1/environ").read())`), quick)
		expectLines(t, res, "read /proc/1/environ ENOENT")
	})
}

// TestProcessListIsolation: a program sees its own processes and nothing
// else: not the host's, not the agent (PID 1, hidden by hidepid), not the
// test that started it.
func TestProcessListIsolation(t *testing.T) {
	env(t)
	t.Run("python", func(t *testing.T) {
		res := attack(t, "python", `
import os, subprocess, time
child = subprocess.Popen(["sleep", "5"])
while open("/proc/%d/comm" % child.pid).read().strip() != "sleep":
    time.sleep(0.01)  # until the child has exec'd
me = os.getpid()
seen = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        seen[int(p)] = open("/proc/%s/comm" % p).read().strip()
print("seen", sorted(seen.values()))
print("own only", set(seen) == {me, child.pid})
print("pid 1 visible", 1 in seen)
print("host pid visible", `+itoa(os.Getpid())+` in seen and seen[`+itoa(os.Getpid())+`] != "python3")
print("small pids", me < 100 and child.pid < 100)
print("NSpid levels", len(open("/proc/self/status").read().split("NSpid:")[1].split("\n")[0].split()))
child.kill()
`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res,
			"seen ['python3', 'sleep']",
			"own only True",
			"pid 1 visible False",
			"host pid visible False",
			"small pids True",
			"NSpid levels 1",
		)
	})
	t.Run("bash", func(t *testing.T) {
		res := attack(t, "bash", `ps -e -o comm= | sort | tr '\n' ' '`, kiln.Limits{Timeout: 10 * time.Second})
		// bash, the ps and sort of the pipeline, and tr.
		expectLines(t, res, "bash ps sort tr ")
	})
	t.Run("node", func(t *testing.T) {
		res := attack(t, "node", `
const fs = require("fs");
const pids = fs.readdirSync("/proc").filter(p => /^\d+$/.test(p));
console.log(JSON.stringify(pids.map(p => fs.readFileSync("/proc/" + p + "/comm", "utf8").trim())), pids.includes(String(process.pid)));
`, kiln.Limits{Timeout: 10 * time.Second})
		expectLines(t, res, `["node"] true`)
	})
}

// TestNoLeftoversBetweenSandboxes: what one run leaves in its workspace,
// /tmp, /dev/shm and System V IPC is gone in the next.
func TestNoLeftoversBetweenSandboxes(t *testing.T) {
	env(t)
	const key = "0x6b696c6e" // "kiln"
	first := attack(t, "python", py(`
for p in ("/workspace/leak.txt", "/tmp/leak.txt", "/dev/shm/leak.txt"):
    with open(p, "w") as f:
        f.write("left behind")
os.mkdir("/tmp/leakdir")
IPC_CREAT = 0o1000
print("shm", libc.shmget(`+key+`, 4096, IPC_CREAT | 0o666) >= 0)
print("msg", libc.msgget(`+key+`, IPC_CREAT | 0o666) >= 0)
print("sem", libc.semget(`+key+`, 1, IPC_CREAT | 0o666) >= 0)
`), quick)
	expectLines(t, first, "shm True", "msg True", "sem True")
	second := attack(t, "python", py(`
for p in ("/workspace/leak.txt", "/tmp/leak.txt", "/dev/shm/leak.txt", "/tmp/leakdir"):
    probe("stat " + p, os.stat, p)
print("workspace", sorted(os.listdir("/workspace")))
print("tmp", os.listdir("/tmp"), "shm", os.listdir("/dev/shm"))
for name, get in (("shmget", lambda: libc.shmget(`+key+`, 0, 0)), ("msgget", lambda: libc.msgget(`+key+`, 0)), ("semget", lambda: libc.semget(`+key+`, 0, 0))):
    ctypes.set_errno(0)
    print(name, "ok" if get() >= 0 else ename(ctypes.get_errno()))
for f in ("shm", "msg", "sem"):
    print("/proc/sysvipc/" + f, len(open("/proc/sysvipc/" + f).readlines()) - 1)
`), quick)
	expectLines(t, second,
		"stat /workspace/leak.txt ENOENT",
		"stat /tmp/leak.txt ENOENT",
		"stat /dev/shm/leak.txt ENOENT",
		"stat /tmp/leakdir ENOENT",
		"workspace ['main.py']",
		"tmp [] shm []",
		"shmget ENOENT",
		"msgget ENOENT",
		"semget ENOENT",
		"/proc/sysvipc/shm 0",
		"/proc/sysvipc/msg 0",
		"/proc/sysvipc/sem 0",
	)
}

// TestHostname: the sandbox has its own hostname.
func TestHostname(t *testing.T) {
	env(t)
	host, _ := os.Hostname()
	if host == "sandbox" {
		t.Skip("this host is itself called sandbox; the case cannot tell the two apart")
	}
	for _, tc := range []struct{ language, code string }{
		{"python", "import os, socket\nprint(socket.gethostname(), os.uname().nodename, open('/etc/hostname').read().strip())"},
		{"bash", "echo $(hostname) $(uname -n) $(cat /etc/hostname)"},
		{"node", "console.log(require('os').hostname(), require('os').hostname(), require('fs').readFileSync('/etc/hostname', 'utf8').trim())"},
	} {
		t.Run(tc.language, func(t *testing.T) {
			res := attack(t, tc.language, tc.code, quick)
			expectLines(t, res, "sandbox sandbox sandbox")
			if strings.Contains(res.Stdout, host) {
				t.Errorf("the sandbox shows the host's hostname %q", host)
			}
		})
	}
}
