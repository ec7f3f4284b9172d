package egress

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// These tests drive the real pip and npm of the host against the mirrors,
// with a local index as the administrator's upstream; nothing leaves the
// machine. They skip where the tool is missing.

// wheel builds a pure-Python wheel of name with its dependencies.
func wheel(t *testing.T, name, version string, requires ...string) (string, []byte) {
	t.Helper()
	mod := strings.ReplaceAll(name, "-", "_")
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	info := mod + "-" + version + ".dist-info/"
	meta := "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := map[string]string{
		mod + "/__init__.py": "VALUE = " + fmt.Sprintf("%q", name) + "\n",
		info + "METADATA":    meta,
		info + "WHEEL":       "Wheel-Version: 1.0\nGenerator: kiln-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		info + "RECORD":      "",
	}
	for n, c := range files {
		w, _ := z.Create(n)
		w.Write([]byte(c))
	}
	z.Close()
	return mod + "-" + version + "-py3-none-any.whl", buf.Bytes()
}

// pep503 serves a PEP 503 index of wheels: /simple/<project>/ and /files/.
func pep503(t *testing.T, wheels map[string][2]any) (*httptest.Server, *atomic.Bool) {
	down := &atomic.Bool{}
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/{project}/", func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", 503)
			return
		}
		wh, ok := wheels[r.PathValue("project")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `<html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`, wh[0], sha256hex(wh[1].([]byte)), wh[0])
	})
	mux.HandleFunc("/files/{file}", func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", 503)
			return
		}
		for _, wh := range wheels {
			if wh[0] == r.PathValue("file") {
				w.Write(wh[1].([]byte))
				return
			}
		}
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, down
}

// TestPipTransitiveDependencyRefused: pip asks the mirror for a
// dependency's page before it can download it, so a dependency that is not
// on the package allowlist stops the install with the policy named.
func TestPipTransitiveDependencyRefused(t *testing.T) {
	if err := exec.Command("python3", "-m", "pip", "--version").Run(); err != nil {
		t.Skip("needs python3 with pip: ", err)
	}
	demoName, demo := wheel(t, "demo-pkg", "1.0", "dep-one")
	depName, dep := wheel(t, "dep-one", "2.0")
	srv, _ := pep503(t, map[string][2]any{"demo-pkg": {demoName, demo}, "dep-one": {depName, dep}})
	for _, c := range []struct {
		allow []string
		ok    bool
	}{{[]string{"demo-pkg"}, false}, {[]string{"demo-pkg", "Dep_One"}, true}} {
		p := mustNew(t, Config{PyPIIndex: srv.URL + "/simple/", Packages: PackagePolicy{Allow: c.allow}})
		var rec recorder
		s := p.Open("s", Policy{Mode: ModeAllowlist}, rec.add)
		_, addr := serveSession(t, s)
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, "python3", "-m", "pip", "download", "--no-cache-dir", "--retries", "0", "--timeout", "10",
			"-d", dir, "--index-url", "http://"+addr+"/pypi/simple/", "demo-pkg")
		cmd.Env = append(os.Environ(), "PIP_CONFIG_FILE=/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK=1", "HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=")
		out, err := cmd.CombinedOutput()
		cancel()
		if c.ok {
			if err != nil {
				t.Fatalf("pip download with both allowed: %v\n%s", err, out)
			}
			if _, err := os.Stat(filepath.Join(dir, depName)); err != nil {
				t.Errorf("the dependency was not downloaded: %v\n%s", err, out)
			}
			continue
		}
		if err == nil || !strings.Contains(string(out), `package "dep-one" is not on the administrator's package allowlist`) {
			t.Errorf("pip download with dep-one not allowed: err %v, want a failure that names the policy and dep-one:\n%s", err, out)
		}
		var refused bool
		for _, r := range rec.all() {
			if r.Kind == KindPyPI && r.Package == "dep-one" && !r.Allowed && strings.Contains(r.Reason, "package allowlist") {
				refused = true
			}
		}
		if !refused {
			t.Errorf("no record refusing dep-one: %+v", rec.all())
		}
		t.Logf("pip's output when a dependency is refused:\n%s", out)
	}
}

// TestPipUnderNoneFailsFastNamingPolicy: under "none", pip fails at once
// and its output names the policy.
func TestPipUnderNoneFailsFastNamingPolicy(t *testing.T) {
	if err := exec.Command("python3", "-m", "pip", "--version").Run(); err != nil {
		t.Skip("needs python3 with pip: ", err)
	}
	p := mustNew(t, Config{PyPIIndex: "http://127.0.0.1:1/simple/"})
	_, addr := serveSession(t, p.Open("s", None, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-m", "pip", "download", "--no-cache-dir", "--retries", "0", "-d", t.TempDir(),
		"--index-url", "http://"+addr+"/pypi/simple/", "requests")
	cmd.Env = append(os.Environ(), "PIP_CONFIG_FILE=/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_FIND_LINKS=")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err == nil || !strings.Contains(string(out), `network policy is "none"`) {
		t.Errorf("pip under none: err %v, want a failure naming the policy:\n%s", err, out)
	}
	t.Logf("pip failed in %v:\n%s", took, out)
}

// TestNPMUnderNoneFailsFastNamingPolicy: under "none", npm fails at once
// and its output names the policy.
func TestNPMUnderNoneFailsFastNamingPolicy(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("needs npm: ", err)
	}
	p := mustNew(t, Config{NPMRegistry: "http://127.0.0.1:1/"})
	_, addr := serveSession(t, p.Open("s", None, nil))
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--fetch-retries=0",
		"--registry", "http://"+addr+"/npm/", "--cache", filepath.Join(dir, ".npm-cache"), "left-pad")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_userconfig=/dev/null")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err == nil || !strings.Contains(string(out), `network policy is`) || !strings.Contains(string(out), `none`) {
		t.Errorf("npm under none: err %v, want a failure naming the policy:\n%s", err, out)
	}
	t.Logf("npm failed in %v:\n%s", took, out)
}

// tgz builds an npm package tarball.
func tgz(t *testing.T, name, version, main string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	pj, _ := json.Marshal(map[string]string{"name": name, "version": version, "main": "index.js"})
	for n, c := range map[string][]byte{"package/package.json": pj, "package/index.js": []byte(main)} {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(c)), ModTime: time.Unix(1e9, 0)})
		tw.Write(c)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// TestNPMInstallThenCachedWithRegistryDown: npm installs through the
// mirror; a second install in a fresh project and a fresh npm cache works
// with the registry down, from the proxy's cache.
func TestNPMInstallThenCachedWithRegistryDown(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("needs npm: ", err)
	}
	tarball := tgz(t, "kiln-pad", "1.0.0", "module.exports = s => '[' + s + ']';\n")
	var down atomic.Bool
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case down.Load():
			http.Error(w, "down", 503)
		case r.URL.Path == "/kiln-pad":
			json.NewEncoder(w).Encode(map[string]any{
				"name": "kiln-pad", "dist-tags": map[string]string{"latest": "1.0.0"},
				"versions": map[string]any{"1.0.0": map[string]any{"name": "kiln-pad", "version": "1.0.0",
					"dist": map[string]string{"tarball": srv.URL + "/kiln-pad/-/kiln-pad-1.0.0.tgz", "integrity": sri512(tarball)}}},
			})
		case r.URL.Path == "/kiln-pad/-/kiln-pad-1.0.0.tgz":
			w.Write(tarball)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p := mustNew(t, Config{NPMRegistry: srv.URL + "/", CacheDir: t.TempDir()})
	var rec recorder
	s := p.Open("s", Policy{Mode: ModeAllowlist}, rec.add)
	_, addr := serveSession(t, s)
	install := func() (time.Duration, error, []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"t","version":"1.0.0"}`), 0o644)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--fetch-retries=0",
			"--registry", "http://"+addr+"/npm/", "--cache", filepath.Join(dir, ".npm-cache"), "kiln-pad")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_userconfig=/dev/null", "HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err == nil {
			if _, serr := os.Stat(filepath.Join(dir, "node_modules/kiln-pad/index.js")); serr != nil {
				err = serr
			}
		}
		return time.Since(start), err, out
	}
	if d, err, out := install(); err != nil {
		t.Fatalf("npm install: %v\n%s", err, out)
	} else {
		t.Logf("first install: %v", d)
	}
	down.Store(true)
	if d, err, out := install(); err != nil {
		t.Fatalf("npm install with the registry down: %v\n%s", err, out)
	} else {
		t.Logf("second install, registry down: %v", d)
	}
	var cachedTarball bool
	for _, r := range rec.all() {
		if r.Kind == KindNPM && r.Cached && r.BytesDown == int64(len(tarball)) {
			cachedTarball = true
		}
	}
	if !cachedTarball {
		t.Errorf("no record of the tarball served from the cache: %+v", rec.all())
	}
}
