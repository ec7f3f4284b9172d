package client

import (
	"context"
	"net/http"
)

// SetNetwork sets the network policy of one of the caller's live
// sessions: within the server's ceiling, or beyond it for an admin (a
// *Problem with status 403 naming the ceiling otherwise). Connections
// the new policy no longer allows are cut.
func (c *Client) SetNetwork(ctx context.Context, sessionID string, p NetworkPolicy) (*Session, error) {
	var out Session
	if err := c.doJSON(ctx, http.MethodPut, route("/v1/sessions/", sessionID, "/network"), p, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
