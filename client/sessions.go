package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// CreateSession starts a session: a sandbox whose workspace and kernels
// live between cells until it is deleted or idle for its TTL.
func (c *Client) CreateSession(ctx context.Context, req SessionRequest) (*Session, error) {
	var out Session
	if err := c.doJSON(ctx, http.MethodPost, "/v1/sessions", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Session returns one of the caller's sessions; another user's session is
// a not_found Problem, like one that never existed.
func (c *Client) Session(ctx context.Context, id string) (*Session, error) {
	var out Session
	if err := c.get(ctx, route("/v1/sessions/", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListOptions narrows ListSessions. Zero fields match everything; Limit 0
// is the server's page size.
type ListOptions struct {
	Status   string            // "active" or "ended"
	Metadata map[string]string // every pair must match
	Limit    int
	Cursor   string // NextCursor of the previous page
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	for k, v := range o.Metadata {
		q.Set("metadata."+k, v)
	}
	pageQuery(q, o.Limit, o.Cursor)
	return q
}

func pageQuery(q url.Values, limit int, cursor string) {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
}

// ListSessions returns one page of the caller's sessions, newest first.
func (c *Client) ListSessions(ctx context.Context, opts ListOptions) (*SessionList, error) {
	var out SessionList
	if err := c.get(ctx, "/v1/sessions", opts.query(), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AllSessions yields every session matching opts, fetching pages as the
// loop goes; it stops at the first error, which it yields.
func (c *Client) AllSessions(ctx context.Context, opts ListOptions) iter.Seq2[Session, error] {
	return func(yield func(Session, error) bool) {
		for {
			page, err := c.ListSessions(ctx, opts)
			if err != nil {
				yield(Session{}, err)
				return
			}
			for _, s := range page.Sessions {
				if !yield(s, nil) {
					return
				}
			}
			// A server that repeats a cursor would loop forever.
			if page.NextCursor == "" || page.NextCursor == opts.Cursor {
				return
			}
			opts.Cursor = page.NextCursor
		}
	}
}

// DeleteSession ends a session and destroys its sandbox and workspace.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: route("/v1/sessions/", id)}, nil)
}

// Interrupt stops the session's running cell, if any; the kernel keeps its
// state when it can.
func (c *Client) Interrupt(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodPost, path: route("/v1/sessions/", id, "/interrupt")}, nil)
}

// Restart restarts the session's kernels, clearing their state and keeping
// the workspace's files; language "" restarts every kernel.
func (c *Client) Restart(ctx context.Context, id, language string) error {
	q := url.Values{}
	if language != "" {
		q.Set("language", language)
	}
	return c.do(ctx, request{method: http.MethodPost, path: route("/v1/sessions/", id, "/restart"), query: q}, nil)
}
