package service

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

func TestCheckPackages(t *testing.T) {
	good := []struct {
		manager, in, want string
	}{
		{"pip", "requests", "requests"},
		{"pip", "requests==2.31.0", "requests==2.31.0"},
		{"pip", "pandas >= 2, < 3", "pandas>=2,<3"},
		{"pip", "scikit_learn~=1.4", "scikit_learn~=1.4"},
		{"pip", "uvicorn[standard]==0.30.*", "uvicorn[standard]==0.30.*"},
		{"npm", "left-pad", "left-pad"},
		{"npm", "left-pad@1.3.0", "left-pad@1.3.0"},
		{"npm", "@types/node@^20", "@types/node@^20"},
		{"npm", "lodash@>=4 <5", "lodash@>=4 <5"},
		{"npm", "react@latest", "react@latest"},
	}
	for _, c := range good {
		got, err := CheckPackages(PackageRequest{Manager: c.manager, Packages: []string{c.in}})
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s %q: %q, %v; want %q", c.manager, c.in, got, err, c.want)
		}
	}
	bad := []struct {
		manager, in, wantMsg string
	}{
		{"pip", "--index-url=http://evil/", "looks like an option"},
		{"pip", "-e.", "looks like an option"},
		{"pip", "https://x.invalid/a.whl", "URL or a path"},
		{"pip", "./local.whl", "URL or a path"},
		{"pip", "/tmp/x.tar.gz", "URL or a path"},
		{"pip", "pkg @ git+https://x.invalid/r", "URL or a path"},
		{"pip", "pkg@foo", "direct reference"},
		{"pip", `requests; python_version<"3.8"`, "environment marker"},
		{"pip", "requests 2.0", "not a package kiln can install"},
		{"pip", "req\x00uests", "not a package kiln can install"},
		{"pip", "", "empty package name"},
		{"pip", strings.Repeat("a", 300), "longer than 256 bytes"},
		{"npm", "-g", "looks like an option"},
		{"npm", "--registry=http://evil/", "looks like an option"},
		{"npm", "left-pad@npm:evil", "URL or a path"},
		{"npm", "user/repo", "URL or a path"},
		{"npm", "git+ssh://git@x.invalid/r.git", "URL or a path"},
		{"npm", "left-pad@file:../x", "URL or a path"},
		{"npm", "./dir", "URL or a path"},
		{"npm", "left pad", "not a package kiln can install"},
		{"npm", ".hidden", "not a package kiln can install"},
		{"npm", "a@1;rm", "not a package kiln can install"},
	}
	for _, c := range bad {
		_, err := CheckPackages(PackageRequest{Manager: c.manager, Packages: []string{"ok", c.in}})
		if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(kiln.Message(err), c.wantMsg) || !strings.Contains(kiln.Message(err), "packages[1]") {
			t.Errorf("%s %q: %v; want invalid naming packages[1] and %q", c.manager, c.in, err, c.wantMsg)
		}
	}
	for _, c := range []struct {
		req  PackageRequest
		want string
	}{
		{PackageRequest{Manager: "apt", Packages: []string{"curl"}}, `use "pip" or "npm"`},
		{PackageRequest{Manager: "pip"}, "name packages to install"},
		{PackageRequest{Manager: "pip", Packages: make([]string, MaxPackages+1)}, "at most 100"},
		{PackageRequest{Manager: "pip", Requirements: "../etc/requirements.txt"}, ".."},
	} {
		_, err := CheckPackages(c.req)
		if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(kiln.Message(err), c.want) {
			t.Errorf("%+v: %v; want invalid saying %q", c.req, err, c.want)
		}
	}
}

// TestInstallRefusedUnderNetworkNone: a session whose network policy is
// none is refused at once, with the policy named, and stays usable.
func TestInstallRefusedUnderNetworkNone(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, 2*time.Minute)
	u := ts.user(t, "alice", false)
	sess, err := ts.CreateSession(ctx, u, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{ManagerPip, ManagerNPM} {
		start := time.Now()
		_, err := ts.InstallPackages(ctx, u, sess.ID, PackageRequest{Manager: m, Packages: []string{"requests"}}, PackageEvents{})
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: refused after %v, want within 2s", m, took)
		}
		if kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(kiln.Message(err), `network policy is "none"`) {
			t.Errorf("%s install under none: %v; want forbidden naming the policy", m, err)
		}
	}
	e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Language: "python", Code: "print(1+1)"}, ExecEvents{})
	if err != nil || e.Result.Stdout != "2\n" {
		t.Fatalf("a cell after the refusal: %+v, %v", e.Result, err)
	}
}

// wheel is a valid pure-Python wheel, written with archive/zip: a module
// name with VALUE = value, and its dependencies.
func wheel(t *testing.T, project, version, module, value string, deps ...string) (name string, data []byte) {
	t.Helper()
	dist := strings.ReplaceAll(project, "-", "_") + "-" + version
	files := [][2]string{
		{module + "/__init__.py", fmt.Sprintf("VALUE = %q\n", value)},
		{dist + ".dist-info/METADATA", "Metadata-Version: 2.1\nName: " + project + "\nVersion: " + version + "\n" + func() string {
			var b strings.Builder
			for _, d := range deps {
				b.WriteString("Requires-Dist: " + d + "\n")
			}
			return b.String()
		}()},
		{dist + ".dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: kiln-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(dist + ".dist-info/RECORD,,\n")
	w, _ := zw.Create(dist + ".dist-info/RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return dist + "-py3-none-any.whl", buf.Bytes()
}

// pep503 serves wheels as a PEP 503 simple index on 127.0.0.1: /simple/
// and /simple/<project>/, the files under /files/. It counts requests per
// project page.
func pep503(t *testing.T, wheels map[string][2]any) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/{project}/", func(w http.ResponseWriter, r *http.Request) {
		whl, ok := wheels[r.PathValue("project")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		name, data := whl[0].(string), whl[1].([]byte)
		sum := sha256.Sum256(data)
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>", name, hex.EncodeToString(sum[:]), name)
	})
	mux.HandleFunc("GET /files/{file}", func(w http.ResponseWriter, r *http.Request) {
		for _, whl := range wheels {
			if whl[0].(string) == r.PathValue("file") {
				w.Write(whl[1].([]byte))
				return
			}
		}
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// writeFile writes a workspace file of u's session.
func (ts *testService) writeFile(t *testing.T, ctx context.Context, u kiln.User, id, p, content string) {
	t.Helper()
	f := ts.Files(u, id)
	defer f.Close()
	if _, _, err := f.Write(ctx, p, strings.NewReader(content), true); err != nil {
		t.Fatal(err)
	}
}

// installedFor is the live install path (policy aside): sessions have
// only the policy none until the egress proxy lands, and this tests what
// comes after the policy's yes. On the unboxed backend the sandbox has
// the host's network, and pip and npm read their index from the
// workspace's (HOME's) configuration.
func (ts *testService) installedFor(t *testing.T, ctx context.Context, u kiln.User, id string, req PackageRequest, ev PackageEvents) (PackageResult, error) {
	t.Helper()
	specs, err := CheckPackages(req)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ts.liveAs(ctx, u, id, kiln.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	return ts.install(ctx, a, u, req, specs, ev)
}

// TestInstallPipFromLocalIndex: pip installs a wheel and its dependency
// from a PEP 503 index into the session's venv (not the workspace); the
// Python kernel that was running imports it without a restart; a
// requirements.txt in the workspace is read, and one with an option is
// refused naming the line.
func TestInstallPipFromLocalIndex(t *testing.T) {
	py, err := SandboxBinary("python3")
	if err != nil {
		t.Skip(err)
	}
	if err := exec.Command(py, "-c", "import venv, pip").Run(); err != nil {
		t.Skip("needs python3's venv and pip modules: " + err.Error())
	}
	tinyName, tiny := wheel(t, "kiln-tiny", "1.0", "kilntiny", "tiny!", "kiln-dep")
	depName, dep := wheel(t, "kiln-dep", "2.5", "kilndep", "dep!")
	srv := pep503(t, map[string][2]any{"kiln-tiny": {tinyName, tiny}, "kiln-dep": {depName, dep}})

	ts := newTestService(t, Config{})
	ctx := ctxT(t, 3*time.Minute)
	u := ts.user(t, "alice", false)
	sess, err := ts.CreateSession(ctx, u, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	ts.writeFile(t, ctx, u, sess.ID, ".config/pip/pip.conf", "[global]\nindex-url = "+srv.URL+"/simple/\nno-cache-dir = false\n")
	// The kernel runs before the install: no restart is needed to see it.
	if e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Language: "python", Code: "import sys; x = 41"}, ExecEvents{}); err != nil || e.Result.Status != kiln.StatusOK {
		t.Fatalf("first cell: %+v, %v", e.Result, err)
	}
	cpuBefore, err := ts.store.CPU(ctx, u.ID, ts.cpu.currentDay())
	if err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	res, err := ts.installedFor(t, ctx, u, sess.ID, PackageRequest{Manager: ManagerPip, Packages: []string{"kiln-tiny==1.0"}},
		PackageEvents{Stdout: func(p []byte) { progress.Write(p) }, Stderr: func(p []byte) { progress.Write(p) }})
	if err != nil {
		t.Fatalf("install: %v\n%s", err, progress.String())
	}
	want := map[string]Package{"kiln-tiny": {Name: "kiln-tiny", Version: "1.0", Requested: true}, "kiln-dep": {Name: "kiln-dep", Version: "2.5"}}
	if len(res.Packages) != 2 || res.Packages[0] != want[res.Packages[0].Name] || res.Packages[1] != want[res.Packages[1].Name] {
		t.Errorf("installed %+v, want %+v", res.Packages, want)
	}
	if !strings.Contains(progress.String(), "kiln-tiny") {
		t.Errorf("no progress streamed naming the package: %q", progress.String())
	}
	// pip's CPU time is the user's, and the install is in the audit log.
	if cpu, err := ts.store.CPU(ctx, u.ID, ts.cpu.currentDay()); err != nil || res.CPU <= 0 || cpu-cpuBefore != res.CPU {
		t.Errorf("CPU charged %v (install used %v), %v; want the install's", cpu-cpuBefore, res.CPU, err)
	}
	entries, _, err := ts.store.ListAudit(ctx, store.AuditFilter{SessionID: sess.ID}, store.Page{Limit: 100})
	if err != nil || !slices.ContainsFunc(entries, func(e store.AuditEntry) bool { return e.Action == "packages.install" && e.Outcome == "ok" }) {
		t.Errorf("audit %+v, %v; want a packages.install entry", entries, err)
	}
	e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Language: "python", Code: "import kilntiny, kilndep\nprint(kilntiny.VALUE, kilndep.VALUE, x + 1)"}, ExecEvents{})
	if err != nil || e.Result.Stdout != "tiny! dep! 42\n" {
		t.Fatalf("import in the same kernel: %+v, %v", e.Result, err)
	}
	// A python3 the cell starts is the venv's, so it sees them too.
	e, err = ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Language: "python",
		Code: "import subprocess\nprint(subprocess.run(['python3', '-c', 'import kilntiny; print(kilntiny.VALUE)'], capture_output=True, text=True).stdout, end='')"}, ExecEvents{})
	if err != nil || e.Result.Stdout != "tiny!\n" {
		t.Errorf("import in a python3 the cell started: %+v, %v", e.Result, err)
	}
	// Nothing of pip's in the workspace: only the config the test wrote.
	f := ts.Files(u, sess.ID)
	list, err := f.List(ctx, "")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range list {
		if fi.Name != ".config" {
			t.Errorf("the install left %q in the workspace", fi.Name)
		}
	}

	// A requirements file: already there is reported as present.
	ts.writeFile(t, ctx, u, sess.ID, "requirements.txt", "# data\nkiln-dep >= 2  # pinned below 3\n\n")
	res, err = ts.installedFor(t, ctx, u, sess.ID, PackageRequest{Manager: ManagerPip, Requirements: "requirements.txt"}, PackageEvents{})
	if err != nil || len(res.Packages) != 1 || res.Packages[0] != (Package{Name: "kiln-dep", Version: "2.5", Requested: true, Present: true}) {
		t.Errorf("requirements.txt: %+v, %v; want kiln-dep 2.5 present", res.Packages, err)
	}
	ts.writeFile(t, ctx, u, sess.ID, "requirements.txt", "kiln-dep\n--extra-index-url http://evil.invalid/\n")
	_, err = ts.installedFor(t, ctx, u, sess.ID, PackageRequest{Manager: ManagerPip, Requirements: "requirements.txt"}, PackageEvents{})
	if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(kiln.Message(err), "line 2") {
		t.Errorf("requirements.txt with an option: %v; want invalid naming line 2", err)
	}
	// A package the index does not have: pip's own words.
	_, err = ts.installedFor(t, ctx, u, sess.ID, PackageRequest{Manager: ManagerPip, Packages: []string{"kiln-nope"}}, PackageEvents{})
	if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(kiln.Message(err), "kiln-nope") {
		t.Errorf("a missing package: %v; want invalid quoting pip", err)
	}
}

// hostNPMRegistry is the registry the host's npm is configured with, read
// at run time, and whether it answers.
func hostNPMRegistry(t *testing.T) (npmrc string) {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("needs npm")
	}
	out, err := exec.Command("npm", "config", "get", "registry").Output()
	reg := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(reg, "http") {
		t.Skipf("the host's npm has no registry configured (%v)", err)
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(strings.TrimSuffix(reg, "/") + "/is-number")
	if err != nil {
		t.Skipf("the host's npm registry is unreachable: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Skipf("the host's npm registry answered %s for is-number", resp.Status)
	}
	npmrc = "registry=" + reg + "\nfetch-retries=0\n"
	// A host whose registry needs its own CA says where it is.
	if out, err := exec.Command("npm", "config", "get", "cafile").Output(); err == nil {
		if ca := strings.TrimSpace(string(out)); strings.HasPrefix(ca, "/") {
			npmrc += "cafile=" + ca + "\n"
		}
	}
	return npmrc
}

// TestInstallNPM: npm installs a small real package from the host's
// registry into the session's node_modules (outside the workspace, with
// npm's cache and logs); a JavaScript kernel started before requires it.
func TestInstallNPM(t *testing.T) {
	npmrc := hostNPMRegistry(t)
	ts := newTestService(t, Config{})
	ctx := ctxT(t, 3*time.Minute)
	u := ts.user(t, "alice", false)
	sess, err := ts.CreateSession(ctx, u, SessionSpec{Languages: []string{"javascript", "typescript"}})
	if err != nil {
		t.Fatal(err)
	}
	ts.writeFile(t, ctx, u, sess.ID, ".npmrc", npmrc)
	if e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Language: "javascript", Code: "let x = 41"}, ExecEvents{}); err != nil || e.Result.Status != kiln.StatusOK {
		t.Fatalf("first cell: %+v, %v", e.Result, err)
	}
	var times []time.Duration
	for range 2 {
		res, err := ts.installedFor(t, ctx, u, sess.ID, PackageRequest{Manager: ManagerNPM, Packages: []string{"is-number@7.0.0"}}, PackageEvents{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Packages) != 1 || res.Packages[0] != (Package{Name: "is-number", Version: "7.0.0", Requested: true}) {
			t.Errorf("installed %+v, want is-number 7.0.0", res.Packages)
		}
		times = append(times, res.Wall)
	}
	t.Logf("npm install is-number: first %v, second %v", times[0], times[1])
	e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Language: "javascript", Code: "console.log(require('is-number')(x + 1), x + 1)"}, ExecEvents{})
	if err != nil || e.Result.Stdout != "true 42\n" {
		t.Fatalf("require in the same kernel: %+v, %v", e.Result, err)
	}
	e, err = ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Language: "typescript", Code: "import isNumber from 'is-number';\nconsole.log(isNumber(7))"}, ExecEvents{})
	if err != nil || e.Result.Stdout != "true\n" {
		t.Errorf("import in TypeScript: %+v, %v", e.Result, err)
	}
	f := ts.Files(u, sess.ID)
	list, err := f.List(ctx, "")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range list {
		if fi.Name != ".npmrc" {
			t.Errorf("the install left %q in the workspace (npm's cache, logs or node_modules belong outside it)", path.Join(fi.Name))
		}
	}
}

// TestDefaultPackages: the Python packages listed are the system
// python3's, at the versions it imports.
func TestDefaultPackages(t *testing.T) {
	py, err := SandboxBinary("python3")
	if err != nil {
		t.Skip(err)
	}
	sandboxPython := func(code string) *exec.Cmd { return exec.Command(py, "-I", "-c", code) }
	if err := sandboxPython("import numpy").Run(); err != nil {
		t.Skip("needs python3 with numpy (scripts/deps installs it)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("needs node")
	}
	pkgs, _, err := DefaultPackages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, err := sandboxPython("import numpy; print(numpy.__version__)").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := PackageVersion{Name: "numpy", Version: strings.TrimSpace(string(out))}
	found := false
	for _, p := range pkgs {
		found = found || p == want
	}
	if !found {
		t.Errorf("default Python packages %v lack %v", pkgs, want)
	}
}

// allowlisted is a live session of a new non-admin user whose policy
// allows a host (so the package mirrors too).
func (ts *testService) allowlisted(t *testing.T, ctx context.Context, name string, languages ...string) (kiln.User, string) {
	t.Helper()
	u := ts.user(t, name, false)
	sess, err := ts.CreateSession(ctx, u, SessionSpec{Languages: languages,
		Network: kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	return u, sess.ID
}

// TestInstallPipThroughProxy (root): in a sandbox whose only way out is
// the egress proxy, the API installs a wheel and its dependency from the
// administrator's index (a PEP 503 index the test serves on loopback,
// configured as the proxy's upstream), the install's egress lists the
// mirror's requests, and the running kernel imports the package. A
// dependency on the package policy's denylist fails the install with a
// forbidden error naming the policy, and the session stays usable.
func TestInstallPipThroughProxy(t *testing.T) {
	tinyName, tiny := wheel(t, "kiln-tiny", "1.0", "kilntiny", "tiny!", "kiln-dep")
	depName, dep := wheel(t, "kiln-dep", "2.5", "kilndep", "dep!")
	srv := pep503(t, map[string][2]any{"kiln-tiny": {tinyName, tiny}, "kiln-dep": {depName, dep}})
	cfg := Config{NetworkCeiling: testCeiling, Egress: egress.Config{PyPIIndex: srv.URL + "/simple/"}}
	ts := newNativeService(t, cfg)
	ctx := ctxT(t, 3*time.Minute)
	u, id := ts.allowlisted(t, ctx, "alice")
	if e, err := ts.Exec(ctx, u, id, kiln.CellRequest{Language: "python", Code: "x = 41"}, ExecEvents{}); err != nil || e.Result.Status != kiln.StatusOK {
		t.Fatalf("first cell: %+v, %v", e.Result, err)
	}
	var progress strings.Builder
	res, err := ts.InstallPackages(ctx, u, id, PackageRequest{Manager: ManagerPip, Packages: []string{"kiln-tiny==1.0"}},
		PackageEvents{Stdout: func(p []byte) { progress.Write(p) }, Stderr: func(p []byte) { progress.Write(p) }})
	if err != nil {
		t.Fatalf("install: %v\n%s", err, progress.String())
	}
	if len(res.Packages) != 2 || !slices.Contains(res.Packages, Package{Name: "kiln-tiny", Version: "1.0", Requested: true}) ||
		!slices.Contains(res.Packages, Package{Name: "kiln-dep", Version: "2.5"}) {
		t.Errorf("installed %+v; want kiln-tiny 1.0 (requested) and kiln-dep 2.5", res.Packages)
	}
	var mirrored []string
	for _, r := range res.Egress {
		if r.Kind == egress.KindPyPI && r.Allowed {
			mirrored = append(mirrored, r.Package)
		}
	}
	if !slices.Contains(mirrored, "kiln-tiny") || !slices.Contains(mirrored, "kiln-dep") {
		t.Errorf("the install's egress %+v; want the mirror's requests for both projects", res.Egress)
	}
	e, err := ts.Exec(ctx, u, id, kiln.CellRequest{Language: "python", Code: "import kilntiny, kilndep\nprint(kilntiny.VALUE, kilndep.VALUE, x + 1)"}, ExecEvents{})
	if err != nil || e.Result.Stdout != "tiny! dep! 42\n" {
		t.Fatalf("import in the same kernel: %+v, %v", e.Result, err)
	}

	// A dependency the package policy denies.
	cfg.Egress.Packages = egress.PackagePolicy{Deny: []string{"kiln-dep"}}
	ts2 := newNativeService(t, cfg)
	u2, id2 := ts2.allowlisted(t, ctx, "bob")
	_, err = ts2.InstallPackages(ctx, u2, id2, PackageRequest{Manager: ManagerPip, Packages: []string{"kiln-tiny"}}, PackageEvents{})
	if kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(kiln.Message(err), "kiln-dep") || !strings.Contains(kiln.Message(err), "policy") {
		t.Errorf("a denied dependency: %v; want forbidden naming kiln-dep and the policy", err)
	}
	if e, err := ts2.Exec(ctx, u2, id2, kiln.CellRequest{Language: "python", Code: "print(1+1)"}, ExecEvents{}); err != nil || e.Result.Stdout != "2\n" {
		t.Errorf("a cell after the refusal: %+v, %v", e.Result, err)
	}
}

// TestInstallNPMThroughProxy (root): npm installs a small real package
// through the egress proxy from the registry the host's npm is
// configured with (read at run time); a JavaScript cell requires it. The
// same install in a second session (npm's own cache is per session) comes
// from the proxy's shared cache: its tarball request says cached.
func TestInstallNPMThroughProxy(t *testing.T) {
	hostNPMRegistry(t) // skips when the host's registry is unreachable
	if os.Geteuid() != 0 {
		t.Skip("needs root: installs through the egress proxy run in the native backend's sandboxes")
	}
	ts := newNativeService(t, Config{NetworkCeiling: testCeiling,
		Egress: egress.Config{CacheDir: t.TempDir(), CacheBytes: 64 << 20}})
	ctx := ctxT(t, 3*time.Minute)
	var walls []time.Duration
	for i, name := range []string{"alice", "bob"} {
		u, id := ts.allowlisted(t, ctx, name, "javascript")
		res, err := ts.InstallPackages(ctx, u, id, PackageRequest{Manager: ManagerNPM, Packages: []string{"is-number@7.0.0"}}, PackageEvents{})
		if err != nil {
			t.Fatalf("install %d: %v", i+1, err)
		}
		if len(res.Packages) != 1 || res.Packages[0] != (Package{Name: "is-number", Version: "7.0.0", Requested: true}) {
			t.Errorf("install %d: %+v; want is-number 7.0.0", i+1, res.Packages)
		}
		cached := false
		for _, r := range res.Egress {
			cached = cached || (r.Kind == egress.KindNPM && r.Cached)
		}
		if i == 1 && !cached {
			t.Errorf("the second install's egress %+v; want the tarball from the shared cache", res.Egress)
		}
		walls = append(walls, res.Wall)
		e, err := ts.Exec(ctx, u, id, kiln.CellRequest{Language: "javascript", Code: "console.log(require('is-number')(42))"}, ExecEvents{})
		if err != nil || e.Result.Stdout != "true\n" {
			t.Fatalf("require after install %d: %+v, %v", i+1, e.Result, err)
		}
	}
	t.Logf("npm install is-number through the proxy: first %v, second (shared cache) %v", walls[0], walls[1])
}

// TestParseNPMLock: the requested packages and their dependencies, each
// resolved as require would (nested first, then hoisted), scoped names
// too; a package that is not there is an error.
func TestParseNPMLock(t *testing.T) {
	lock := `{"lockfileVersion": 3, "packages": {
		"": {"dependencies": {"a": "^1"}},
		"node_modules/a": {"version": "1.0.0", "dependencies": {"b": "^2", "@s/c": "*"}},
		"node_modules/a/node_modules/b": {"version": "2.0.0", "dependencies": {"d": "1"}},
		"node_modules/b": {"version": "3.0.0"},
		"node_modules/@s/c": {"version": "0.1.0", "optionalDependencies": {"b": "3"}},
		"node_modules/d": {"version": "1.2.3"},
		"node_modules/other": {"version": "9.9.9"}}}`
	got, err := parseNPMLock([]byte(lock), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{{Name: "a", Version: "1.0.0", Requested: true}, {Name: "@s/c", Version: "0.1.0"}, {Name: "b", Version: "3.0.0", Requested: true},
		{Name: "b", Version: "2.0.0"}, {Name: "d", Version: "1.2.3"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if _, err := parseNPMLock([]byte(lock), []string{"missing"}); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("a package not in node_modules: %v", err)
	}
}
