package client

import (
	"context"
	"net/http"
)

// Health reports whether the server process is alive
// (GET /v1/health/live, no key needed).
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, path: "/v1/health/live", noAuth: true}, nil)
}

// Ready reports whether the server can take work (GET /v1/health/ready, no
// key needed). A server that is not ready answers a *Problem, usually 503
// with RetryAfterSeconds.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, path: "/v1/health/ready", noAuth: true}, nil)
}

// Languages lists the languages the server runs, with their versions and
// whether their runtimes are installed.
func (c *Client) Languages(ctx context.Context) ([]Language, error) {
	var out []Language
	if err := c.get(ctx, "/v1/languages", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Run runs code once in a fresh sandbox and returns its result and the
// files it created or changed.
func (c *Client) Run(ctx context.Context, req RunRequest) (*RunResult, error) {
	var out RunResult
	if err := c.doJSON(ctx, http.MethodPost, "/v1/run", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
