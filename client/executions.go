package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
)

// Exec runs a cell in a session and waits for it to end. A cell that ran
// and failed (an exception, a timeout) is an Execution with that status,
// not an error; an error means the cell could not run at all.
func (c *Client) Exec(ctx context.Context, sessionID string, req ExecRequest) (*Execution, error) {
	var out Execution
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/executions"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Execution returns one execution by its id.
func (c *Client) Execution(ctx context.Context, id string) (*Execution, error) {
	var out Execution
	if err := c.get(ctx, route("/v1/executions/", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// History returns one page of a session's executions, oldest first; limit
// 0 is the server's page size, cursor "" the first page.
func (c *Client) History(ctx context.Context, sessionID string, limit int, cursor string) (*ExecutionList, error) {
	q := url.Values{}
	pageQuery(q, limit, cursor)
	var out ExecutionList
	if err := c.get(ctx, route("/v1/sessions/", sessionID, "/executions"), q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AllExecutions yields a session's whole history, oldest first, fetching
// pages as the loop goes; it stops at the first error, which it yields.
func (c *Client) AllExecutions(ctx context.Context, sessionID string) iter.Seq2[Execution, error] {
	return func(yield func(Execution, error) bool) {
		cursor := ""
		for {
			page, err := c.History(ctx, sessionID, 0, cursor)
			if err != nil {
				yield(Execution{}, err)
				return
			}
			for _, x := range page.Executions {
				if !yield(x, nil) {
					return
				}
			}
			if page.NextCursor == "" || page.NextCursor == cursor {
				return
			}
			cursor = page.NextCursor
		}
	}
}
