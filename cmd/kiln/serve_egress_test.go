package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/test/testkiln"
)

// TestServeEgressConfig: the egress proxy's settings come from flags and
// from --config: the package indexes (default: the host's, read at run
// time), the download cache (default under the data directory, 2 GiB),
// the package policy ("data" for kiln's list) and the per-sandbox bounds.
func TestServeEgressConfig(t *testing.T) {
	var stderr bytes.Buffer
	f, err := parseServe([]string{"--data", "/srv/kiln"}, &stderr)
	if err != nil {
		t.Fatalf("parseServe: %v: %s", err, stderr.String())
	}
	e := f.svc.Egress
	if e.PyPIIndex != "" || e.NPMRegistry != "" {
		t.Errorf("default indexes %q, %q; want empty (the host's own configuration)", e.PyPIIndex, e.NPMRegistry)
	}
	if e.CacheDir != "/srv/kiln/"+packageCacheDir || e.CacheBytes != 2*kiln.GiB {
		t.Errorf("default cache %q, %d bytes; want /srv/kiln/%s, 2 GiB", e.CacheDir, e.CacheBytes, packageCacheDir)
	}
	if len(e.Packages.Allow)+len(e.Packages.Deny) != 0 || e.MaxConns != egress.DefaultMaxConns || e.MaxBytes != egress.DefaultMaxBytes {
		t.Errorf("default policy %+v, conns %d, bytes %d; want open, egress's defaults", e.Packages, e.MaxConns, e.MaxBytes)
	}

	cfg := filepath.Join(t.TempDir(), "kiln.json")
	os.WriteFile(cfg, []byte(`{"pip-index": "http://127.0.0.1:9/simple", "npm-registry": "https://npm.example.test/",
		"package-cache": "/var/cache/kiln", "package-cache-size": "512M", "package-allow": "data",
		"package-deny": "evil-pkg, npm:left-pad", "egress-max-conns": 8, "egress-max-bytes": "1G"}`), 0o600)
	f, err = parseServe([]string{"--config", cfg, "--package-allow", "npm:lodash", "--egress-max-conns", "4"}, &stderr)
	if err != nil {
		t.Fatalf("parseServe: %v: %s", err, stderr.String())
	}
	e = f.svc.Egress
	if e.PyPIIndex != "http://127.0.0.1:9/simple" || e.NPMRegistry != "https://npm.example.test/" {
		t.Errorf("indexes %q, %q", e.PyPIIndex, e.NPMRegistry)
	}
	if e.CacheDir != "/var/cache/kiln" || e.CacheBytes != 512*kiln.MiB {
		t.Errorf("cache %q, %d bytes; want /var/cache/kiln, 512 MiB", e.CacheDir, e.CacheBytes)
	}
	// The command line's --package-allow wins over the file's (as every
	// flag does), so "data" is not there.
	if !slices.Equal(e.Packages.Allow, []string{"npm:lodash"}) || !slices.Equal(e.Packages.Deny, []string{"evil-pkg", "npm:left-pad"}) {
		t.Errorf("package policy %+v", e.Packages)
	}
	if e.MaxConns != 4 || e.MaxBytes != kiln.GiB {
		t.Errorf("bounds %d conns, %d bytes; want 4 (the command line's), 1 GiB", e.MaxConns, e.MaxBytes)
	}

	f, err = parseServe([]string{"--package-allow", "data,npm:lodash", "--package-cache", "none"}, &stderr)
	if err != nil {
		t.Fatalf("parseServe: %v: %s", err, stderr.String())
	}
	if want := append(slices.Clone(egress.DefaultDataPackages), "npm:lodash"); !slices.Equal(f.svc.Egress.Packages.Allow, want) {
		t.Errorf("--package-allow data,npm:lodash = %q; want kiln's data list and npm:lodash", f.svc.Egress.Packages.Allow)
	}
	if !slices.Contains(f.svc.Egress.Packages.Allow, "pandas") || f.svc.Egress.CacheDir != "" {
		t.Errorf("allow %q (want pandas in it), cache %q (want none)", f.svc.Egress.Packages.Allow, f.svc.Egress.CacheDir)
	}
}

// TestServeEgressConfigErrors: a bad egress setting, on the command line or
// in --config, is refused saying what is wrong and what is allowed.
func TestServeEgressConfigErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pip-index", "ftp://mirror.example.test/simple"}, "not an http:// or https:// URL"},
		{[]string{"--npm-registry", "registry.example.test"}, "not an http:// or https:// URL"},
		{[]string{"--package-cache-size", "0"}, "is not a size"},
		{[]string{"--package-cache-size", "-1G"}, "is not a size"},
		{[]string{"--package-allow", " , "}, "no package name given"},
		{[]string{"--package-deny", "bad name"}, "is not a package name"},
		{[]string{"--egress-max-conns", "0"}, "not a number of connections from 1"},
		{[]string{"--egress-max-bytes", "lots"}, "is not a size"},
	} {
		var stderr bytes.Buffer
		if _, err := parseServe(c.args, &stderr); err == nil || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: %v, %q; want a usage error containing %q", c.args, err, stderr.String(), c.want)
		}
	}
	dir := t.TempDir()
	for _, c := range []struct{ file, want string }{
		{`{"pip-index": "not a url"}`, `"pip-index": not an http:// or https:// URL`},
		{`{"egress-max-conns": -3}`, `"egress-max-conns": "-3" is not a number of connections`},
		{`{"package-allow": ["numpy"]}`, `"package-allow" must be a string`},
	} {
		p := filepath.Join(dir, "c.json")
		os.WriteFile(p, []byte(c.file), 0o600)
		if _, err := parseServe([]string{"--config", p}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %s", c.file, err, c.want)
		}
	}
}

// TestServeUsesPackageCache: a served kiln opens its download cache where
// --package-cache says, and under the data directory without it.
func TestServeUsesPackageCache(t *testing.T) {
	needRoot(t)
	cache := filepath.Join(t.TempDir(), "cache")
	s := testkiln.Start(t, testkiln.Options{Bin: kilnBin, Args: []string{"--run-pool", "0", "--package-cache", cache, "--package-cache-size", "64M"}})
	if _, err := os.Stat(filepath.Join(cache, "sha256")); err != nil {
		t.Errorf("kiln serve --package-cache %s did not open its cache there: %v\n%s", cache, err, s.Logs())
	}
	if _, err := os.Stat(filepath.Join(s.Data, packageCacheDir)); err == nil {
		t.Errorf("with --package-cache, a cache was made under the data directory too")
	}
	s.Stop()
	s = testkiln.Start(t, testkiln.Options{Bin: kilnBin, Data: s.Data, Args: []string{"--run-pool", "0"}})
	if _, err := os.Stat(filepath.Join(s.Data, packageCacheDir, "sha256")); err != nil {
		t.Errorf("kiln serve without --package-cache has no cache under its data directory: %v\n%s", err, s.Logs())
	}
}
