package service

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/batch"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// vendoredGo is a one-shot Go program in a module that vendors a small
// library, and the library's own test, as the issue measures them.
func vendoredGo(test bool) RunRequest {
	files := []File{
		{Path: "go.mod", Data: []byte("module example.com/app\n\ngo 1.21\n\nrequire example.com/mathx v1.0.0\n")},
		{Path: "vendor/modules.txt", Data: []byte("# example.com/mathx v1.0.0\n## explicit\nexample.com/mathx\n")},
		{Path: "vendor/example.com/mathx/mathx.go", Data: []byte("package mathx\n\nimport \"sort\"\n\n// Median of xs.\nfunc Median(xs []float64) float64 {\n\ts := append([]float64(nil), xs...)\n\tsort.Float64s(s)\n\treturn s[len(s)/2]\n}\n")},
	}
	if test {
		return RunRequest{Language: "go", Name: "main_test.go", Files: files, Limits: kiln.Limits{Timeout: 3 * time.Minute},
			Code: "package main\n\nimport (\n\t\"testing\"\n\n\t\"example.com/mathx\"\n)\n\nfunc TestMedian(t *testing.T) {\n\tif m := mathx.Median([]float64{3, 1, 2}); m != 2 {\n\t\tt.Fatalf(\"median %v\", m)\n\t}\n}\n"}
	}
	return RunRequest{Language: "go", Name: "main.go", Files: files, Limits: kiln.Limits{Timeout: 3 * time.Minute},
		Code: "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/mathx\"\n)\n\nfunc main() { fmt.Println(mathx.Median([]float64{3, 1, 2})) }\n"}
}

// TestBuildCachePerUser: a user's build caches carry across one-shot runs
// (each in a fresh sandbox): the second run of the same Go program is a
// cached build, and its tests' too. Another user's sandbox gets a cache of
// its own: the same program builds again there, it cannot see the first
// user's builds, and what it writes into its cache stays out of the first
// user's. The cache directories on the host are not listable.
func TestBuildCachePerUser(t *testing.T) {
	ts := newNativeService(t, Config{Workspaces: "tmpfs"})
	if l, err := lang.Lookup("go"); err != nil || l.Available() != nil {
		t.Skip("needs Go in /usr/local/go")
	}
	alice, bob := ts.user(t, "alice", false), ts.user(t, "bob", false)
	run := func(u kiln.User, r RunRequest) (kiln.CellResult, time.Duration) {
		t.Helper()
		start := time.Now()
		res, err := ts.Run(ctxT(t, 5*time.Minute), u, r)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s's run: %v", u.Name, err)
		}
		if res.Result.Status != kiln.StatusOK {
			t.Fatalf("%s's run: %+v\nstdout %q\nstderr %q", u.Name, res.Result.Error, res.Result.Stdout, res.Result.Stderr)
		}
		return res.Result, took
	}
	cold, coldT := run(alice, vendoredGo(false))
	warm, warmT := run(alice, vendoredGo(false))
	if cold.Stdout != "2\n" || warm.Stdout != "2\n" {
		t.Fatalf("stdout %q then %q; want 2", cold.Stdout, warm.Stdout)
	}
	if cold.BuildUsage == nil || warm.BuildUsage != nil {
		t.Errorf("alice's two runs: build usage %v then %v; want a build, then the cached one", cold.BuildUsage, warm.BuildUsage)
	}
	testCold, testColdT := run(alice, vendoredGo(true))
	testWarm, testWarmT := run(alice, vendoredGo(true))
	if testCold.Tests == nil || testCold.Tests.Passed != 1 || testWarm.BuildUsage != nil {
		t.Errorf("alice's go test: %+v, then build usage %v; want TestMedian passed, then a cached build", testCold.Tests, testWarm.BuildUsage)
	}
	t.Logf("vendored Go one-shot: %v cold (build %v), %v warm; go test: %v cold, %v warm",
		coldT.Round(time.Millisecond), cold.BuildUsage.Wall.Round(time.Millisecond), warmT.Round(time.Millisecond),
		testColdT.Round(time.Millisecond), testWarmT.Round(time.Millisecond))

	// Bob builds the same program: not from alice's cache.
	bobs, _ := run(bob, vendoredGo(false))
	if bobs.BuildUsage == nil {
		t.Errorf("bob's first run of alice's program was a cached build: alice's cache reached bob's sandbox")
	}
	aliceDir := filepath.Join(ts.cfg.DataDir, "caches", alice.ID)
	aliceBuilds := listDir(t, filepath.Join(aliceDir, "build"))
	if len(aliceBuilds) == 0 {
		t.Fatalf("alice's cache has no builds on the host: %s", aliceDir)
	}
	// Bob's sandbox sees only its own cache, and writes only there.
	probe := RunRequest{Language: "go", Name: "probe.go", Limits: kiln.Limits{Timeout: 3 * time.Minute}, Code: `package main

import (
	"fmt"
	"os"
)

func main() {
	entries, _ := os.ReadDir("/tmp/.kiln-cache/build")
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	if err := os.WriteFile("/tmp/.kiln-cache/build/from-bob", []byte("x"), 0o666); err != nil {
		fmt.Println("write:", err)
	}
}
`}
	bobsOwn := map[string]bool{}
	for _, b := range listDir(t, filepath.Join(ts.cfg.DataDir, "caches", bob.ID, "build")) {
		bobsOwn[b] = true
	}
	seen, _ := run(bob, probe)
	onlyAlices := 0
	for _, a := range aliceBuilds {
		if bobsOwn[a] {
			continue // the program both built
		}
		onlyAlices++
		for _, name := range strings.Fields(seen.Stdout) {
			if name == a {
				t.Errorf("bob's sandbox lists alice's build %s", a)
			}
		}
	}
	if onlyAlices == 0 {
		t.Errorf("alice's cache has no build of her own (her go test): %v", aliceBuilds)
	}
	if strings.Contains(seen.Stdout, "write:") {
		t.Errorf("bob could not write his own cache: %s", seen.Stdout)
	}
	if _, err := os.Lstat(filepath.Join(aliceDir, "build", "from-bob")); err == nil {
		t.Errorf("bob's write landed in alice's cache")
	}
	if _, err := os.Lstat(filepath.Join(ts.cfg.DataDir, "caches", bob.ID, "build", "from-bob")); err != nil {
		t.Errorf("bob's write is not in bob's cache: %v", err)
	}
	for _, dir := range []string{filepath.Join(ts.cfg.DataDir, "caches"), aliceDir} {
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v, %v; want mode 0711 (not listable by other host users)", dir, fi.Mode(), err)
		}
	}
}

// TestBuildCacheBounded: a cache over its bound is dropped whole, and the
// next run builds again.
func TestBuildCacheBounded(t *testing.T) {
	ts := newNativeService(t, Config{Workspaces: "tmpfs", BuildCacheBytes: 1 << 20})
	if l, err := lang.Lookup("go"); err != nil || l.Available() != nil {
		t.Skip("needs Go in /usr/local/go")
	}
	u := ts.user(t, "alice", false)
	for i := range 2 {
		res, err := ts.Run(ctxT(t, 5*time.Minute), u, vendoredGo(false))
		if err != nil || res.Result.Status != kiln.StatusOK {
			t.Fatalf("run %d: %+v, %v", i, res.Result.Error, err)
		}
		if res.Result.BuildUsage == nil {
			t.Errorf("run %d was a cached build, though the cache (a seeded Go cache is some 40 MB) is over its 1 MiB bound", i)
		}
		ts.caches.mu.Lock()
		ts.caches.trimmed = nil // measure after every run
		ts.caches.mu.Unlock()
	}
	if size := treeSize(filepath.Join(ts.cfg.DataDir, "caches", u.ID)); size > 1<<20 {
		t.Errorf("the cache holds %d bytes after the run; want it dropped under its 1 MiB bound", size)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// TestBuildCacheSharedAtOnce: a user's sandboxes share the build caches
// while they run at once (each with its own host uid): a batch of
// identical Go and C++ items, run concurrently, all pass, and a rerun of
// them is served from the caches' builds.
func TestBuildCacheSharedAtOnce(t *testing.T) {
	ts := newNativeService(t, Config{Workspaces: "tmpfs", UserConcurrency: 4})
	for _, name := range []string{"go", "cpp"} {
		if l, err := lang.Lookup(name); err != nil || l.Available() != nil {
			t.Skipf("needs the %s runtime", name)
		}
	}
	u := ts.user(t, "alice", false)
	// Eight builds at once on a machine that runs other test packages
	// too: the test is about sharing the caches, not speed, so the items
	// get more than the default 30 s (four cold go test builds at once
	// ran past it in CI).
	slow := kiln.Limits{Timeout: 2 * time.Minute}
	var items []batch.Item
	for range 4 {
		items = append(items,
			batch.Item{Language: "go", Code: "func Sq(x int) int { return x * x }\n", Limits: slow,
				Check: batch.Check{Test: "import \"testing\"\n\nfunc TestSq(t *testing.T) {\n\tif Sq(7) != 49 {\n\t\tt.Fatal(Sq(7))\n\t}\n}\n"}},
			batch.Item{Language: "cpp", Code: "#include <iostream>\nint main() { std::cout << 6 * 7 << std::endl; }\n", Limits: slow, Check: batch.Check{Stdout: strp("42\n")}})
	}
	for round := range 2 {
		_, w, err := ts.CreateBatch(ctxT(t, 10*time.Minute), u, BatchRequest{Items: items})
		if err != nil {
			t.Fatal(err)
		}
		built := 0
		for i, r := range collectBatch(t, w) {
			if !r.Passed {
				t.Errorf("round %d, item %d (%s): %s %s\nstderr %q", round, i, items[i].Language, r.Reason, r.Detail, r.Result.Stderr)
			}
			if r.Result.BuildUsage != nil {
				built++
			}
		}
		if round == 1 && built != 0 {
			t.Errorf("the rerun built %d of %d items; want every build from the caches", built, len(items))
		}
	}
}
