package client

import (
	"context"
	"net/http"
)

// ShareSession shares one of the caller's sessions with the user userID
// as role ("viewer" or "collaborator"), or changes the role of an
// existing share. Only the owner may share.
func (c *Client) ShareSession(ctx context.Context, sessionID, userID, role string) (*Share, error) {
	var out Share
	if err := c.doJSON(ctx, http.MethodPut, route("/v1/sessions/", sessionID, "/shares/", userID), ShareRequest{Role: role}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeShare ends userID's share of the caller's session: from the next
// request on, that user gets not_found for it.
func (c *Client) RevokeShare(ctx context.Context, sessionID, userID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: route("/v1/sessions/", sessionID, "/shares/", userID)}, nil)
}

// Shares lists who the caller's session is shared with.
func (c *Client) Shares(ctx context.Context, sessionID string) (*ShareList, error) {
	var out ShareList
	if err := c.get(ctx, route("/v1/sessions/", sessionID, "/shares"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
