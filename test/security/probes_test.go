//go:build linux

package security

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// pyPrelude gives Python attacks a uniform way to report each attempt as
// one line "LABEL RESULT", where RESULT is "ok" or the errno's name.
const pyPrelude = `import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)

def ename(e):
    return errno.errorcode.get(e, "errno%d" % e)

def probe(label, f, *args):
    try:
        f(*args)
    except OSError as e:
        print(label, ename(e.errno))
    else:
        print(label, "ok")

def sysc(label, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    print(label, "ok" if r >= 0 else ename(ctypes.get_errno()))

def write(path):
    with open(path, "w") as f:
        f.write("pwned")

`

// py is a Python attack with the prelude.
func py(code string) string { return pyPrelude + code }

// jsPrelude does the same for Node.js.
const jsPrelude = `const fs = require("fs");
function probe(label, f) {
  try { f(); console.log(label + " ok"); }
  catch (e) { console.log(label + " " + (e.code || e.message)); }
}
`

func js(code string) string { return jsPrelude + code }

// shPrelude does the same for bash: it runs a command and names the error
// it printed.
const shPrelude = `probe() {
  local label=$1; shift
  local out
  if out=$("$@" 2>&1 </dev/null); then echo "$label ok"; return; fi
  case $out in
    *"Read-only file system"*) echo "$label EROFS" ;;
    *"Permission denied"*) echo "$label EACCES" ;;
    *"Operation not permitted"*) echo "$label EPERM" ;;
    *"No such file or directory"*) echo "$label ENOENT" ;;
    *"Network is unreachable"*) echo "$label ENETUNREACH" ;;
    *"Connection refused"*) echo "$label ECONNREFUSED" ;;
    *"No space left on device"*) echo "$label ENOSPC" ;;
    *"must be superuser"*) echo "$label EPERM" ;;
    *) echo "$label failed: $out" ;;
  esac
}
`

func sh(code string) string { return shPrelude + code }

// expectLines requires the program to have exited 0 and printed exactly
// want, one line each.
func expectLines(t *testing.T, res result, want ...string) {
	t.Helper()
	want, gaps := onDockerWant(t, want)
	defer dockerGap(t, gaps...)
	if diff := cmp.Diff(want, lines(res.Stdout)); diff != "" {
		t.Errorf("output differs from what the sandbox must enforce (-want +got):\n%s\n%v", diff, res)
		return
	}
	if res.Exit.Code != 0 || res.Exit.Signal != "" {
		t.Errorf("program did not exit 0:\n%v", res)
	}
}

// needAMD64 skips tests that name system calls by their amd64 numbers.
func needAMD64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("system call numbers in this test are amd64's; this is %s", runtime.GOARCH)
	}
}

// quote makes a Go string a Python, JS or bash string literal of plain
// printable ASCII without quotes or backslashes.
func quote(s string) string {
	if strings.ContainsAny(s, "'\"\\\n$`") {
		panic("quote: unsupported string " + s)
	}
	return "'" + s + "'"
}

// pyBool is how Python prints b.
func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// quick are the limits of a case that only probes: defaults, with a short
// timeout so that a hang shows as a failure rather than a stuck suite.
var quick = kiln.Limits{Timeout: 5 * time.Second}
