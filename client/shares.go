package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
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

// WatchSession calls fn with each event of the session's event stream
// (GET /v1/sessions/{id}/events): started, stdout, stderr, display and
// done of the cells of every user of the session, each with its
// ExecutionID. fn runs on the caller's goroutine. It returns ctx's error
// when ctx ends, nil when the server ends the stream (the session ended,
// or its share with the caller was revoked), and the *Problem of an error
// event (the caller fell too far behind: read the history and watch
// again).
func (c *Client) WatchSession(ctx context.Context, sessionID string, fn func(Event)) error {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: route("/v1/sessions/", sessionID, "/events"), accept: "text/event-stream"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("kiln client: asked for an event stream, the server answered %q", resp.Header.Get("Content-Type"))
	}
	sr := newSSEReader(resp.Body)
	for {
		name, data, err := sr.next()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("kiln client: the session's event stream: %w", err)
		}
		var ev Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("kiln client: a %q event that is not JSON: %w", name, err)
		}
		if ev.Type == "" {
			ev.Type = name
		}
		if ev.Type == EventError && ev.Error != nil {
			return ev.Error
		}
		if fn != nil {
			fn(ev)
		}
	}
}
