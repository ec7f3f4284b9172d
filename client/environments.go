package client

import (
	"context"
	"net/http"
	"time"
)

// Environment is an administrator's prebuilt environment: pinned pip
// and npm packages on the server's runtimes, which a session selects by
// name (SessionRequest.Environment) once it is built (kiln env build).
type Environment struct {
	Name string   `json:"name"`
	Pip  []string `json:"pip"` // as the administrator pinned them
	NPM  []string `json:"npm"`
	// Built: the layer for this definition is there, so sessions may
	// select it.
	Built bool `json:"built"`
	// Hash is the content address of the built layer (the definition
	// and the runtimes' versions).
	Hash    string     `json:"hash,omitempty"`
	BuiltAt *time.Time `json:"built_at,omitempty"`
	// Python and Node are what the layer holds, dependencies too, with
	// their versions, once built.
	Python []InstalledPackage `json:"python,omitempty"`
	Node   []InstalledPackage `json:"node,omitempty"`
}

// EnvironmentBuild is what POST /v1/environments/{name}/build did: Built
// is false when the layer was there already (an unchanged definition
// builds once).
type EnvironmentBuild struct {
	Environment Environment `json:"environment"`
	Built       bool        `json:"built"`
}

// Environments lists the server's environments, built or not.
func (c *Client) Environments(ctx context.Context) ([]Environment, error) {
	var out []Environment
	if err := c.get(ctx, "/v1/environments", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// BuildEnvironment builds an environment (admin), or says it was built
// already. A build installs every package and may take minutes.
func (c *Client) BuildEnvironment(ctx context.Context, name string) (*EnvironmentBuild, error) {
	var out EnvironmentBuild
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/environments/", name, "/build"), struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
