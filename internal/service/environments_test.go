package service

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
)

func TestCheckEnvironments(t *testing.T) {
	ok := []EnvironmentDef{{Name: "data-science", Pip: []string{"pandas==2.2.2"}, NPM: []string{"lodash@4.17.21"}}, {Name: "web", NPM: []string{"left-pad"}}}
	if err := CheckEnvironments(ok); err != nil {
		t.Errorf("good definitions: %v", err)
	}
	for _, c := range []struct {
		defs []EnvironmentDef
		want string
	}{
		{[]EnvironmentDef{{Name: "Data Science", Pip: []string{"x"}}}, "lowercase letters"},
		{[]EnvironmentDef{{Name: "../x", Pip: []string{"x"}}}, "lowercase letters"},
		{[]EnvironmentDef{{Name: "a", Pip: []string{"x"}}, {Name: "a", Pip: []string{"y"}}}, "defined twice"},
		{[]EnvironmentDef{{Name: "a"}}, "names no packages"},
		{[]EnvironmentDef{{Name: "a", Pip: []string{"--index-url=http://x.invalid/"}}}, "looks like an option"},
		{[]EnvironmentDef{{Name: "a", NPM: []string{"left-pad@file:../x"}}}, "URL or a path"},
	} {
		if err := CheckEnvironments(c.defs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error saying %q", c.defs, err, c.want)
		}
	}
}

// envService is a native service whose administrator's index is a PEP
// 503 index the test serves, with the environment "data-science" holding
// kiln-tiny (and through it kiln-dep).
func envService(t *testing.T, poolSize int) *testService {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: environments are built and mounted in the native backend's sandboxes")
	}
	if _, err := SandboxBinary("python3"); err != nil {
		t.Skip(err)
	}
	tinyName, tiny := wheel(t, "kiln-tiny", "1.0", "kilntiny", "tiny!", "kiln-dep")
	depName, dep := wheel(t, "kiln-dep", "2.5", "kilndep", "dep!")
	srv := pep503(t, map[string][2]any{"kiln-tiny": {tinyName, tiny}, "kiln-dep": {depName, dep}})
	return newNativeService(t, Config{NetworkCeiling: testCeiling, PoolSize: poolSize,
		Egress:       egress.Config{PyPIIndex: srv.URL + "/simple/"},
		Environments: []EnvironmentDef{{Name: "data-science", Pip: []string{"kiln-tiny==1.0"}}, {Name: "other", Pip: []string{"kiln-dep"}}}})
}

// TestEnvironmentBuildAndUse (root): an administrator builds an
// environment from the administrator's index through the egress proxy;
// a rebuild of the unchanged definition is a no-op; a session that
// selects it imports its packages (with the network policy "none"),
// cannot write to its layer, and can still install its own packages
// over it; a session without it cannot import them. An unknown or
// unbuilt environment is refused naming what there is.
func TestEnvironmentBuildAndUse(t *testing.T) {
	ts := envService(t, -1)
	ctx := ctxT(t, 4*time.Minute)
	admin := ts.user(t, "root", true)
	u := ts.user(t, "alice", false)

	_, err := ts.CreateSession(ctx, u, SessionSpec{Environment: "nope"})
	if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(kiln.Message(err), "data-science, other") {
		t.Errorf("an unknown environment: %v; want invalid naming the defined ones", err)
	}
	_, err = ts.CreateSession(ctx, u, SessionSpec{Environment: "data-science"})
	if kiln.KindOf(err) != kiln.Conflict || !strings.Contains(kiln.Message(err), "kiln env build data-science") {
		t.Errorf("an unbuilt environment: %v; want a conflict saying how to build it", err)
	}
	if _, _, err := ts.BuildEnvironment(ctx, u, "data-science", PackageEvents{}); kiln.KindOf(err) != kiln.Forbidden {
		t.Errorf("a build by a non-admin: %v; want forbidden", err)
	}

	var progress strings.Builder
	env, built, err := ts.BuildEnvironment(ctx, admin, "data-science", PackageEvents{Stdout: func(p []byte) { progress.Write(p) }, Stderr: func(p []byte) { progress.Write(p) }})
	if err != nil || !built || !env.Built {
		t.Fatalf("build: %+v, built %v, %v\n%s", env, built, err, progress.String())
	}
	if !slices.Contains(env.Python, Package{Name: "kiln-tiny", Version: "1.0", Requested: true}) || !slices.Contains(env.Python, Package{Name: "kiln-dep", Version: "2.5"}) {
		t.Errorf("built packages %+v; want kiln-tiny 1.0 and kiln-dep 2.5", env.Python)
	}
	layer := filepath.Join(ts.envs.root, "data-science", env.Hash)
	if left, _ := filepath.Glob(filepath.Join(ts.envs.root, "*", ".building-*")); len(left) > 0 {
		t.Errorf("the build left %v", left)
	}
	before, err := os.Stat(layer)
	if err != nil {
		t.Fatal(err)
	}
	again, built, err := ts.BuildEnvironment(ctx, admin, "data-science", PackageEvents{})
	if err != nil || built || again.Hash != env.Hash {
		t.Errorf("rebuild of the unchanged definition: %+v, built %v, %v; want a no-op with hash %s", again, built, err, env.Hash)
	}
	if after, err := os.Stat(layer); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the rebuild touched the layer: %v, %v", after, err)
	}
	list := ts.Environments(ctx)
	if len(list) != 2 || list[0].Name != "data-science" || !list[0].Built || list[1].Name != "other" || list[1].Built {
		t.Errorf("environments %+v; want data-science built and other not", list)
	}

	sess, err := ts.CreateSession(ctx, u, SessionSpec{Environment: "data-science"})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Environment != "data-science" {
		t.Errorf("session %+v; want its environment named", sess)
	}
	run := func(id, code string) string {
		t.Helper()
		e, err := ts.Exec(ctx, u, id, kiln.CellRequest{Language: "python", Code: code}, ExecEvents{})
		if err != nil {
			t.Fatal(err)
		}
		return e.Result.Stdout + e.Result.Stderr + func() string {
			if e.Result.Error != nil {
				return e.Result.Error.Name
			}
			return ""
		}()
	}
	if out := run(sess.ID, "import kilntiny, kilndep\nprint(kilntiny.VALUE, kilndep.VALUE)"); out != "tiny! dep!\n" {
		t.Errorf("import in a session with the environment: %q", out)
	}
	// A python3 the cell starts sees it too.
	if out := run(sess.ID, "import subprocess\nprint(subprocess.run(['python3', '-c', 'import kilntiny; print(kilntiny.VALUE)'], capture_output=True, text=True).stdout, end='')"); out != "tiny!\n" {
		t.Errorf("import in a subprocess: %q", out)
	}
	// The layer is read-only: the mount refuses a write whatever the
	// file's mode.
	write := `import errno, os
site = os.path.join(os.environ.get("TMPDIR") or "/tmp", ".kiln-environment", "python", "site-packages")
for p in (os.path.join(site, "kilntiny", "evil.py"), "/mnt/.kiln-environments/evil"):
    try:
        open(p, "w").write("x")
        print("wrote", p)
    except OSError as e:
        print(errno.errorcode[e.errno])`
	if out := run(sess.ID, write); out != "EROFS\nEROFS\n" {
		t.Errorf("writes to the layer: %q; want EROFS twice", out)
	}
	// A session with the environment can still install its own
	// packages, and they come ahead of the environment's.
	net, err := ts.CreateSession(ctx, u, SessionSpec{Environment: "data-science",
		Network: kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.InstallPackages(ctx, u, net.ID, PackageRequest{Manager: ManagerPip, Packages: []string{"kiln-dep==2.5"}}, PackageEvents{}); err != nil {
		t.Fatalf("install over the environment: %v", err)
	}
	for _, code := range []string{"import kilndep, kilntiny\nprint(kilndep.__file__, kilntiny.__file__)",
		"import subprocess\nprint(subprocess.run(['python3', '-c', 'import kilndep, kilntiny; print(kilndep.__file__, kilntiny.__file__)'], capture_output=True, text=True).stdout, end='')"} {
		out := strings.Fields(run(net.ID, code))
		if len(out) != 2 || !strings.Contains(out[0], "/packages/python/") || !strings.HasPrefix(out[1], "/tmp/.kiln-environment/") {
			t.Errorf("%s: %q; want kilndep from the session's venv, kilntiny from the environment", code, out)
		}
	}

	// A one-shot run selects it too; the result cache keys on it.
	for _, cached := range []bool{false, true} {
		runFn := ts.Run
		if cached {
			runFn = ts.RunCached
		}
		res, err := runFn(ctx, u, RunRequest{Language: "python", Code: "import kilntiny\nprint(kilntiny.VALUE)", Environment: "data-science"})
		if err != nil || res.Result.Stdout != "tiny!\n" {
			t.Errorf("a one-shot run with the environment (cache %v): %+v, %v", cached, res.Result, err)
		}
	}
	if res, err := ts.RunCached(ctx, u, RunRequest{Language: "python", Code: "import kilntiny\nprint(kilntiny.VALUE)"}); err != nil || res.Cached || res.Result.Stdout == "tiny!\n" {
		t.Errorf("the same run without the environment: %+v, cached %v, %v; want a ModuleNotFoundError run now", res.Result, res.Cached, err)
	}
	if _, err := ts.Run(ctx, u, RunRequest{Language: "python", Code: "1", Environment: "other"}); kiln.KindOf(err) != kiln.Conflict {
		t.Errorf("a run with an unbuilt environment: %v; want a conflict", err)
	}

	plain, err := ts.CreateSession(ctx, u, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if out := run(plain.ID, "import kilntiny"); !strings.Contains(out, "ModuleNotFoundError") {
		t.Errorf("import in a session without the environment: %q; want ModuleNotFoundError", out)
	}
}

// TestEnvironmentSessionCreateTime (root) is the benchmark:
// session create with an environment against one without, both from the
// warm pool, alternating in the same run; it logs the medians and fails
// only when the environment costs more than 50 ms (the target is 5 ms;
// a loaded 2-core machine is not the place to hold it).
func TestEnvironmentSessionCreateTime(t *testing.T) {
	ts := envService(t, 1)
	ctx := ctxT(t, 5*time.Minute)
	admin := ts.user(t, "root", true)
	if _, _, err := ts.BuildEnvironment(ctx, admin, "data-science", PackageEvents{}); err != nil {
		t.Fatal(err)
	}
	u := ts.user(t, "alice", false)
	waitPool := func() {
		for deadline := time.Now().Add(time.Minute); len(ts.pool.ready) < ts.pool.size; {
			if time.Now().After(deadline) {
				t.Fatal("the pool did not refill in a minute")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var with, without, withCell, withoutCell []time.Duration
	for i := range 8 {
		for _, env := range []string{"", "data-science"} {
			waitPool()
			start := time.Now()
			sess, err := ts.CreateSession(ctx, u, SessionSpec{Environment: env})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			// The first cell: it waits for the environment's link.
			e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Language: "python", Code: "print(1)"}, ExecEvents{})
			first := time.Since(start)
			if err != nil || e.Result.Stdout != "1\n" {
				t.Fatalf("first cell: %+v, %v", e.Result, err)
			}
			if i > 0 { // the first round warms the caches
				if env == "" {
					without, withoutCell = append(without, took), append(withoutCell, first)
				} else {
					with, withCell = append(with, took), append(withCell, first)
				}
			}
			if err := ts.DeleteSession(ctx, u, sess.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	med := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	mw, mo := med(with), med(without)
	t.Logf("session create from the pool, medians of %d: without an environment %v, with one %v (difference %v)", len(with), mo, mw, mw-mo)
	t.Logf("session create and its first cell (print(1)), medians: without an environment %v, with one %v", med(withoutCell), med(withCell))
	if mw-mo > 50*time.Millisecond {
		t.Errorf("an environment adds %v to session create; want within 5 ms (50 ms allowed on a loaded machine)", mw-mo)
	}
}

// TestEnvironmentNPM (root, and the host's npm registry): an environment
// of an npm package builds through the egress proxy, and a JavaScript
// cell of a session that selects it requires the package; the listing
// gives its version.
func TestEnvironmentNPM(t *testing.T) {
	hostNPMRegistry(t) // skips when the host's registry is unreachable
	if os.Geteuid() != 0 {
		t.Skip("needs root: environments are built and mounted in the native backend's sandboxes")
	}
	ts := newNativeService(t, Config{NetworkCeiling: testCeiling, Egress: egress.Config{CacheDir: t.TempDir(), CacheBytes: 64 << 20},
		Environments: []EnvironmentDef{{Name: "js", NPM: []string{"is-number@7.0.0"}}}})
	ctx := ctxT(t, 4*time.Minute)
	admin := ts.user(t, "root", true)
	env, built, err := ts.BuildEnvironment(ctx, admin, "js", PackageEvents{})
	if err != nil || !built || !slices.Contains(env.Node, Package{Name: "is-number", Version: "7.0.0", Requested: true}) {
		t.Fatalf("build: %+v, built %v, %v; want is-number 7.0.0", env, built, err)
	}
	u := ts.user(t, "alice", false)
	sess, err := ts.CreateSession(ctx, u, SessionSpec{Languages: []string{"javascript"}, Environment: "js"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Language: "javascript", Code: "console.log(require('is-number')(42))"}, ExecEvents{})
	if err != nil || e.Result.Stdout != "true\n" {
		t.Errorf("require in a session with the environment: %+v, %v", e.Result, err)
	}
}
