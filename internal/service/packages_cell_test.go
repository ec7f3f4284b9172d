package service

import (
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestPipTypedInACell (root): `pip install` typed in a bash cell installs
// into the session's venv through the egress proxy (no PEP 668 refusal),
// and the running Python kernel imports it; once the venv exists,
// `python3 -m pip install` from a Python subprocess installs there too;
// a package the policy denies is refused and recorded with the reason;
// `npm install NAME` in a bash cell goes to the session's node prefix, not
// the workspace, and node run from bash requires it.
func TestPipTypedInACell(t *testing.T) {
	tinyName, tiny := wheel(t, "kiln-tiny", "1.0", "kilntiny", "tiny!", "kiln-dep")
	depName, dep := wheel(t, "kiln-dep", "2.5", "kilndep", "dep!")
	otherName, other := wheel(t, "kiln-other", "3.0", "kilnother", "other!")
	badName, bad := wheel(t, "kiln-bad", "1.0", "kilnbad", "bad!")
	srv := pep503(t, map[string][2]any{"kiln-tiny": {tinyName, tiny}, "kiln-dep": {depName, dep},
		"kiln-other": {otherName, other}, "kiln-bad": {badName, bad}})
	cfg := Config{NetworkCeiling: testCeiling, Egress: egress.Config{PyPIIndex: srv.URL + "/simple/",
		Packages: egress.PackagePolicy{Deny: []string{"kiln-bad"}}}}
	ts := newNativeService(t, cfg)
	ctx := ctxT(t, 4*time.Minute)
	u, id := ts.allowlisted(t, ctx, "alice", "python", "bash")
	run := func(lang, code string) kiln.CellResult {
		t.Helper()
		e, err := ts.Exec(ctx, u, id, kiln.CellRequest{Language: lang, Code: code}, ExecEvents{})
		if err != nil {
			t.Fatalf("%s cell %q: %v", lang, code, err)
		}
		return *e.Result
	}
	if r := run("python", "x = 41"); r.Status != kiln.StatusOK {
		t.Fatalf("first cell: %+v", r)
	}

	r := run("bash", "pip install kiln-tiny 2>&1 | tail -n 3")
	if !strings.Contains(r.Stdout, "Successfully installed kiln-dep-2.5 kiln-tiny-1.0") || strings.Contains(r.Stdout, "externally-managed") {
		t.Fatalf("pip install in a bash cell: %q %q; want it installed", r.Stdout, r.Stderr)
	}
	// The next cell's shell, and any process, finds the venv first.
	if r := run("bash", `echo "venv=$VIRTUAL_ENV"; type -P python3 pip; sh -c 'command -v pip'`); r.Stdout != "venv=/tmp/.kiln/packages/python\n"+
		"/tmp/.kiln/packages/python/bin/python3\n/tmp/.kiln/packages/python/bin/pip\n/tmp/.kiln/packages/python/bin/pip\n" {
		t.Errorf("after pip in a bash cell: %q %q; want VIRTUAL_ENV and the venv's python3 and pip first on PATH", r.Stdout, r.Stderr)
	}
	mirrored := map[string]bool{}
	for _, e := range r.Egress {
		if e.Kind == egress.KindPyPI && e.Allowed {
			mirrored[e.Package] = true
		}
	}
	if !mirrored["kiln-tiny"] || !mirrored["kiln-dep"] {
		t.Errorf("the bash cell's egress %+v; want the mirror's requests for kiln-tiny and kiln-dep", r.Egress)
	}
	if r := run("python", "import kilntiny, kilndep\nprint(kilntiny.VALUE, kilndep.VALUE, x + 1)"); r.Stdout != "tiny! dep! 42\n" {
		t.Errorf("import in the running kernel: %+v", r)
	}

	r = run("python", `import subprocess
p = subprocess.run(["python3", "-m", "pip", "install", "kiln-other"], capture_output=True, text=True)
print(p.returncode, p.stdout.strip().splitlines()[-1:], p.stderr[-300:])
import kilnother
print(kilnother.VALUE)`)
	if !strings.HasPrefix(r.Stdout, "0 ['Successfully installed kiln-other-3.0']") || !strings.HasSuffix(r.Stdout, "other!\n") {
		t.Errorf("python3 -m pip install from a Python subprocess: %q %q", r.Stdout, r.Stderr)
	}

	r = run("bash", "pip install kiln-bad >/dev/null 2>&1; echo rc=$?; echo alive")
	if strings.Contains(r.Stdout, "rc=0") || !strings.HasSuffix(r.Stdout, "alive\n") {
		t.Errorf("a denied package in a bash cell: %q; want pip to fail and the cell to go on", r.Stdout)
	}
	denied := false
	for _, e := range r.Egress {
		denied = denied || (!e.Allowed && strings.Contains(e.Reason, "kiln-bad") && strings.Contains(e.Reason, "denylist"))
	}
	if !denied {
		t.Errorf("the denied install's egress %+v; want a refusal naming kiln-bad and the denylist", r.Egress)
	}

	// npm with a local folder: no registry needed, the prefix is what is
	// checked.
	r = run("bash", `mkdir -p /tmp/lp && printf '{"name":"kiln-local","version":"1.0.0","main":"index.js"}' >/tmp/lp/package.json &&
printf 'module.exports = "local!"\n' >/tmp/lp/index.js
npm install /tmp/lp >/dev/null 2>&1; echo rc=$?
ls -d /tmp/.kiln/packages/node/node_modules/kiln-local node_modules 2>&1
node -e 'console.log(require("kiln-local"))'`)
	if !strings.Contains(r.Stdout, "rc=0\n") || !strings.Contains(r.Stdout, "\n/tmp/.kiln/packages/node/node_modules/kiln-local\n") ||
		!strings.Contains(r.Stdout, "'node_modules': No such file") ||
		!strings.HasSuffix(r.Stdout, "local!\n") {
		t.Errorf("npm install in a bash cell: %q %q; want it in the session's prefix, none in the workspace, and node to require it", r.Stdout, r.Stderr)
	}
}
