package main

import (
	"flag"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/internal/egress"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// packageCacheDir is the shared download cache's default place under the
// data directory. It is not under the egress socket directory, which is
// emptied at every start.
const packageCacheDir = "package-cache"

// dataPackages is the --package-allow word for egress.DefaultDataPackages.
const dataPackages = "data"

// addEgressFlags defines the administrator's settings of the egress
// proxy: package indexes, the shared download cache, the package policy
// and the per-session bounds. An empty index means the host's own pip or
// npm configuration, read at run time.
func addEgressFlags(fs *flag.FlagSet, cfg *egress.Config) {
	fs.Func("pip-index", "the `URL` of the PEP 503 simple index pip installs come from (default: the host's own pip configuration, read at run time)", func(v string) error {
		return setIndexURL(&cfg.PyPIIndex, v)
	})
	fs.Func("npm-registry", "the `URL` of the npm registry npm installs come from (default: the host's own npm configuration, read at run time)", func(v string) error {
		return setIndexURL(&cfg.NPMRegistry, v)
	})
	fs.StringVar(&cfg.CacheDir, "package-cache", "", "the `folder` of the download cache shared by all sessions (default DATA/"+packageCacheDir+"); none: no cache")
	cfg.CacheBytes = egress.DefaultCacheBytes
	fs.Var(sizeValue{&cfg.CacheBytes}, "package-cache-size", "the bound on the download cache (a `size`: 2G)")
	fs.Func("package-allow", "only these package `names` may be installed, pip's and npm's (comma-separated, repeatable; pypi:name or npm:name for one ecosystem, npm:@scope/*); "+dataPackages+": kiln's list for data work (numpy, pandas, scikit-learn, matplotlib, requests, ...); default: any", func(v string) error {
		return addPackageNames(&cfg.Packages.Allow, v, true)
	})
	fs.Func("package-deny", "these package `names` may never be installed, directly or as a dependency (comma-separated, repeatable)", func(v string) error {
		return addPackageNames(&cfg.Packages.Deny, v, false)
	})
	cfg.MaxConns = egress.DefaultMaxConns
	fs.Func("egress-max-conns", fmt.Sprintf("connections through the egress proxy open at once per sandbox (default %d)", egress.DefaultMaxConns), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return fmt.Errorf("%q is not a number of connections from 1 to 100000", v)
		}
		cfg.MaxConns = n
		return nil
	})
	cfg.MaxBytes = egress.DefaultMaxBytes
	fs.Var(sizeValue{&cfg.MaxBytes}, "egress-max-bytes", "bytes through the egress proxy per sandbox, both ways (a `size`: 4G)")
}

// finishEgressFlags fills in what depends on the data directory: the
// cache's default place, an absolute path either way.
func finishEgressFlags(cfg *egress.Config, dataDir string) error {
	switch cfg.CacheDir {
	case "":
		cfg.CacheDir = filepath.Join(dataDir, packageCacheDir)
	case "none":
		cfg.CacheDir = ""
		return nil
	}
	abs, err := filepath.Abs(cfg.CacheDir)
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "--package-cache %s", cfg.CacheDir)
	}
	cfg.CacheDir = abs
	return nil
}

// setIndexURL checks an administrator's package index: an http(s) URL
// with a host, no credentials in it echoed back in an error.
func setIndexURL(dst *string, v string) error {
	v = strings.TrimSpace(v)
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("not an http:// or https:// URL with a host")
	}
	*dst = v
	return nil
}

// addPackageNames adds comma-separated package names to a policy list;
// in an allow list the word "data" stands for kiln's list for data work.
func addPackageNames(list *[]string, v string, allow bool) error {
	var names []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
		case allow && n == dataPackages:
			names = append(names, egress.DefaultDataPackages...)
		default:
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no package name given; name packages such as numpy,pandas (comma-separated)")
	}
	if err := (egress.PackagePolicy{Allow: names}).Validate(); err != nil {
		return err
	}
	*list = append(*list, names...)
	return nil
}
