package egress

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// upstream is one mirror's upstream URL: the administrator's setting, or,
// when that is empty, read from the host's own configuration at run time
// (so no registry's host name is written into kiln). A discovered value is
// kept for a while and read again after, so a changed host configuration
// is picked up without a restart.
type upstream struct {
	fixed    string
	discover func(ctx context.Context) (string, error)

	mu  sync.Mutex
	url string
	err error
	at  time.Time
}

const (
	discoverKeep  = 10 * time.Minute
	discoverRetry = 30 * time.Second
)

// get returns the upstream base URL, ending in "/".
func (u *upstream) get(ctx context.Context) (string, error) {
	if u.fixed != "" {
		return u.fixed, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	age := time.Since(u.at)
	if !u.at.IsZero() && (u.err == nil && age < discoverKeep || u.err != nil && age < discoverRetry) {
		return u.url, u.err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := u.discover(ctx)
	if err == nil {
		raw, err = checkUpstream(raw)
	}
	u.url, u.err, u.at = raw, err, time.Now()
	return raw, err
}

// checkUpstream checks an index URL and gives it a trailing slash.
func checkUpstream(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	pu, err := url.Parse(raw)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return "", kiln.Errorf(kiln.Invalid, "egress: package index %q is not an http(s) URL", raw)
	}
	if !strings.HasSuffix(raw, "/") {
		raw += "/"
	}
	return raw, nil
}

// runOutput runs argv (no shell) and returns its trimmed stdout.
func runOutput(ctx context.Context, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "NO_COLOR=1")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// discoverPyPI reads the host's pip index: PIP_INDEX_URL, then the
// index-url of `pip config list` (which reads every pip.conf), then pip's
// own built-in default, asked of pip itself.
func discoverPyPI(ctx context.Context) (string, error) {
	if v := os.Getenv("PIP_INDEX_URL"); v != "" {
		return v, nil
	}
	if out, err := runOutput(ctx, "python3", "-m", "pip", "config", "list"); err == nil {
		if v := pipIndexFromConfigList(out); v != "" {
			return v, nil
		}
	}
	out, err := runOutput(ctx, "python3", "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)")
	if err != nil || out == "" {
		return "", kiln.Wrap(kiln.Unsupported, err, "egress: no pip index is configured: set the proxy's PyPI index, PIP_INDEX_URL or index-url in pip.conf")
	}
	return out, nil
}

// pipIndexFromConfigList picks the index URL out of `pip config list`
// output (lines like global.index-url='https://...'), in pip's own order
// of precedence.
func pipIndexFromConfigList(out string) string {
	vals := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		vals[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `'"`)
	}
	for _, k := range []string{":env:.index-url", "install.index-url", "global.index-url"} {
		if v := vals[k]; v != "" {
			return v
		}
	}
	return ""
}

// discoverNPM asks npm for its registry.
func discoverNPM(ctx context.Context) (string, error) {
	out, err := runOutput(ctx, "npm", "config", "get", "registry")
	if err != nil || out == "" || out == "undefined" {
		return "", kiln.Wrap(kiln.Unsupported, err, "egress: no npm registry is configured: set the proxy's npm registry, or the registry in the host's npm config")
	}
	return out, nil
}
