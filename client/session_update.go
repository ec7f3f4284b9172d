package client

import (
	"context"
	"net/http"
)

// RenameSession sets the session's name (owner only); "" removes it.
func (c *Client) RenameSession(ctx context.Context, sessionID, name string) (*Session, error) {
	var out Session
	if err := c.doJSON(ctx, http.MethodPatch, route("/v1/sessions/", sessionID), SessionUpdate{Name: &name}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
