package service

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/batch"
	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestRunWithPackages (root): a one-shot run with an allowlist and
// packages installs them from the administrator's index (a PEP 503 index
// the test serves on loopback) in its own sandbox and imports them; the
// result lists what was installed and the mirror's requests. The same
// run without packages cannot import them (nothing leaks between runs),
// the result cache does not serve one for the other, packages under the
// policy "none" are refused at once naming it, and a policy beyond the
// ceiling is refused naming the ceiling.
func TestRunWithPackages(t *testing.T) {
	tinyName, tiny := wheel(t, "kiln-tiny", "1.0", "kilntiny", "tiny!", "kiln-dep")
	depName, dep := wheel(t, "kiln-dep", "2.5", "kilndep", "dep!")
	srv := pep503(t, map[string][2]any{"kiln-tiny": {tinyName, tiny}, "kiln-dep": {depName, dep}})
	ts := newNativeService(t, Config{NetworkCeiling: testCeiling, Egress: egress.Config{PyPIIndex: srv.URL + "/simple/"}})
	ctx := ctxT(t, 3*time.Minute)
	u := ts.user(t, "alice", false)
	allow := kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com"}}
	code := "import kilntiny, kilndep\nprint(kilntiny.VALUE, kilndep.VALUE)"

	res, err := ts.RunCached(ctx, u, RunRequest{Language: "python", Code: code, Network: allow, Packages: []string{"kiln-tiny==1.0"}})
	if err != nil || res.Result.Stdout != "tiny! dep!\n" {
		t.Fatalf("run with packages: %+v, %v", res.Result, err)
	}
	if res.Packages == nil || !slices.Contains(res.Packages.Packages, Package{Name: "kiln-tiny", Version: "1.0", Requested: true}) ||
		!slices.Contains(res.Packages.Packages, Package{Name: "kiln-dep", Version: "2.5"}) {
		t.Errorf("the run's packages %+v; want kiln-tiny 1.0 (requested) and kiln-dep 2.5", res.Packages)
	}
	var mirrored []string
	for _, r := range res.Result.Egress {
		if r.Kind == egress.KindPyPI && r.Allowed {
			mirrored = append(mirrored, r.Package)
		}
	}
	if !slices.Contains(mirrored, "kiln-tiny") {
		t.Errorf("the run's egress %+v; want the mirror's request for kiln-tiny", res.Result.Egress)
	}

	// The same code without packages, cached or not: no import, and not
	// the cached result of the run with them.
	for _, cached := range []bool{true, false} {
		run := ts.Run
		if cached {
			run = ts.RunCached
		}
		res, err = run(ctx, u, RunRequest{Language: "python", Code: code})
		if err != nil || res.Cached || res.Packages != nil || res.Result.Error == nil || res.Result.Error.Name != "ModuleNotFoundError" {
			t.Errorf("run without packages (cache %v): cached %v, %+v (error %+v), %v; want ModuleNotFoundError", cached, res.Cached, res.Result, res.Result.Error, err)
		}
	}

	start := time.Now()
	_, err = ts.Run(ctx, u, RunRequest{Language: "python", Code: code, Packages: []string{"kiln-tiny"}})
	if kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(kiln.Message(err), `"none"`) {
		t.Errorf("packages under none: %v; want forbidden naming the policy", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("packages under none took %v to be refused; want at once", d)
	}

	_, err = ts.Run(ctx, u, RunRequest{Language: "python", Code: "1", Network: kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"evil.test"}}})
	if kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(kiln.Message(err), "ceiling") {
		t.Errorf("a run's network beyond the ceiling: %v; want forbidden naming the ceiling", err)
	}
}

// TestBatchItemPackages (root): a batch item with packages, under the
// batch's allowlist, installs them in its sandbox and passes its test,
// which imports them; the same item without packages fails it (a runtime
// error); a batch whose packages are under the policy "none" is refused
// at creation, naming the policy, before anything runs.
func TestBatchItemPackages(t *testing.T) {
	tinyName, tiny := wheel(t, "kiln-tiny", "1.0", "kilntiny", "tiny!")
	srv := pep503(t, map[string][2]any{"kiln-tiny": {tinyName, tiny}})
	ts := newNativeService(t, Config{NetworkCeiling: testCeiling, Egress: egress.Config{PyPIIndex: srv.URL + "/simple/"}})
	ctx := ctxT(t, 3*time.Minute)
	u := ts.user(t, "alice", false)
	allow := &kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist, Allow: []string{"example.com"}}
	test := batch.Check{Test: "import kilntiny\nassert kilntiny.VALUE == 'tiny!'"}
	items := []batch.Item{
		{ID: "with", Language: "python", Code: "x = 1", Packages: []string{"kiln-tiny"}, Check: test},
		{ID: "without", Language: "python", Code: "x = 1", Check: test},
	}
	_, w, err := ts.CreateBatch(ctx, u, BatchRequest{Items: items, Network: allow})
	if err != nil {
		t.Fatal(err)
	}
	got := collectBatch(t, w)
	if r := got[0]; !r.Passed {
		t.Errorf("the item with packages: %+v (%s); want passed", r.Verdict, r.Result.Stderr)
	}
	if r := got[1]; r.Passed || r.Reason != batch.RuntimeError {
		t.Errorf("the item without packages: %+v; want a runtime error", r.Verdict)
	}

	_, _, err = ts.CreateBatch(ctx, u, BatchRequest{Items: items[1:], Packages: []string{"kiln-tiny"}})
	if kiln.KindOf(err) != kiln.Forbidden || !strings.Contains(kiln.Message(err), `"none"`) {
		t.Errorf("a batch's packages under none: %v; want forbidden naming the policy", err)
	}
}

// TestRunWithNPMPackage (root, the host's npm registry): a JavaScript
// one-shot run with a package and an allowlist requires it (npm, the
// default for JavaScript).
func TestRunWithNPMPackage(t *testing.T) {
	hostNPMRegistry(t) // skips when the host's registry is unreachable
	ts := newNativeService(t, Config{NetworkCeiling: testCeiling})
	ctx := ctxT(t, 3*time.Minute)
	u := ts.user(t, "alice", false)
	res, err := ts.Run(ctx, u, RunRequest{Language: "javascript", Code: "console.log(require('is-number')(42))",
		Network: kiln.NetworkPolicy{Mode: kiln.NetworkAllowlist}, Packages: []string{"is-number@7.0.0"}})
	if err != nil || res.Result.Stdout != "true\n" {
		t.Fatalf("a JavaScript run with is-number: %+v (error %+v), %v", res.Result, res.Result.Error, err)
	}
	if res.Packages == nil || res.Packages.Manager != ManagerNPM || len(res.Packages.Packages) != 1 || res.Packages.Packages[0].Version != "7.0.0" {
		t.Errorf("the run's packages %+v; want is-number 7.0.0 with npm", res.Packages)
	}
}
