package client

import (
	"context"
	"errors"
	"net/http"
)

// PackageRequest installs packages into a session
// (POST /v1/sessions/{id}/packages): names with optional versions, or a
// requirements file already in the workspace, or both. A name is only a
// name and a version ("requests==2.31.0", "left-pad@1.3.0"): no options,
// URLs or paths. The session's network policy must allow the
// administrator's package index (not "none").
type PackageRequest struct {
	Manager  string   `json:"manager"` // pip or npm
	Packages []string `json:"packages,omitempty"`
	// Requirements is a workspace path: a requirements.txt for pip (names
	// and versions, one a line; no options), a package.json for npm (its
	// dependencies and devDependencies).
	Requirements string `json:"requirements,omitempty"`
}

// PackageResult is what an install did.
type PackageResult struct {
	Manager string `json:"manager"`
	// Packages are the requested packages and the dependencies installed
	// for them, with their versions.
	Packages []InstalledPackage `json:"packages"`
	WallMS   float64            `json:"wall_ms"`
	// Egress is what pip or npm asked of the egress proxy: the package
	// mirrors' requests, each saying whether the shared download cache
	// served it (cached).
	Egress []EgressRecord `json:"egress,omitempty"`
}

// InstalledPackage is one package of an install.
type InstalledPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Requested: named in the request, not only a dependency.
	Requested bool `json:"requested"`
	// Present: it was there already (the system's, or installed before),
	// so nothing was installed for it now.
	Present bool `json:"present,omitempty"`
}

// InstallPackages installs packages into a session and returns what was
// installed once it is done.
func (c *Client) InstallPackages(ctx context.Context, sessionID string, req PackageRequest) (*PackageResult, error) {
	var out PackageResult
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/packages"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// InstallPackagesStream installs packages as InstallPackages does, with
// pip's or npm's output passed to fn as stdout and stderr events while it
// runs (queued and started first; then done, whose Packages is the
// result, or error).
func (c *Client) InstallPackagesStream(ctx context.Context, sessionID string, req PackageRequest, fn func(Event)) (*PackageResult, error) {
	sr, body, err := c.postStream(ctx, route("/v1/sessions/", sessionID, "/packages"), req)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	for {
		ev, err := sr.nextEvent(ctx, "the install")
		if err != nil {
			return nil, err
		}
		if fn != nil {
			fn(ev)
		}
		switch ev.Type {
		case EventDone:
			if ev.Packages == nil {
				return nil, errors.New("kiln client: a done event without the installed packages")
			}
			return ev.Packages, nil
		case EventError:
			if ev.Error == nil {
				return nil, &Problem{Title: "Install failed", Code: "internal", Detail: "the install failed and the server gave no reason"}
			}
			return nil, ev.Error
		}
	}
}

// PackageVersion is a package and its version: a language's packages
// there by default (Language.Packages).
type PackageVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}
