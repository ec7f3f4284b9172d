package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// GitStatus reports the session's workspace as a git repository.
func (c *Client) GitStatus(ctx context.Context, sessionID string) (*GitStatus, error) {
	var out GitStatus
	if err := c.get(ctx, route("/v1/sessions/", sessionID, "/git/status"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GitInit makes the workspace a repository.
func (c *Client) GitInit(ctx context.Context, sessionID string) (*GitStatus, error) {
	var out GitStatus
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/git/init"), struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GitDiff is the diff of path ("" for all): the worktree against the
// index, or with staged the index against HEAD.
func (c *Client) GitDiff(ctx context.Context, sessionID, path string, staged bool) (*GitDiff, error) {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if staged {
		q.Set("staged", "true")
	}
	var out GitDiff
	if err := c.get(ctx, route("/v1/sessions/", sessionID, "/git/diff"), q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GitStage stages paths.
func (c *Client) GitStage(ctx context.Context, sessionID string, paths []string) (*GitStatus, error) {
	var out GitStatus
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/git/stage"), GitStageRequest{Paths: paths}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GitUnstage takes paths out of the index, keeping the files.
func (c *Client) GitUnstage(ctx context.Context, sessionID string, paths []string) (*GitStatus, error) {
	var out GitStatus
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/git/unstage"), GitStageRequest{Paths: paths}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GitCommit commits what is staged.
func (c *Client) GitCommit(ctx context.Context, sessionID, message string) (*GitCommit, error) {
	var out GitCommit
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/git/commit"), GitCommitRequest{Message: message}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GitLog lists the last limit commits (0: the server's default).
func (c *Client) GitLog(ctx context.Context, sessionID string, limit int) (*GitLog, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out GitLog
	if err := c.get(ctx, route("/v1/sessions/", sessionID, "/git/log"), q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GitRestore checks out path as it was in commit.
func (c *Client) GitRestore(ctx context.Context, sessionID, commit, path string) (*GitStatus, error) {
	var out GitStatus
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/git/restore"), GitRestoreRequest{Commit: commit, Path: path}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GitFromBundle makes the workspace a repository from a git bundle in it.
func (c *Client) GitFromBundle(ctx context.Context, sessionID, bundle string) (*GitStatus, error) {
	var out GitStatus
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/git/bundle"), GitBundleRequest{Bundle: bundle}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
