package client

import (
	"context"
	"net/http"
)

// Complete asks the session's kernel for completions at cursor (code
// points into code); language "" is the session's first.
func (c *Client) Complete(ctx context.Context, sessionID string, req CompleteRequest) (*Completion, error) {
	var out Completion
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/complete"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Format formats code with the language's formatter in the session's
// sandbox.
func (c *Client) Format(ctx context.Context, sessionID string, req FormatRequest) (string, error) {
	var out Formatted
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/format"), req, &out); err != nil {
		return "", err
	}
	return out.Code, nil
}
