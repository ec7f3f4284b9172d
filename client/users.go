package client

import (
	"context"
	"net/http"
	"net/url"
)

// CreateUser makes a user (admins only).
func (c *Client) CreateUser(ctx context.Context, req UserRequest) (*User, error) {
	var out User
	if err := c.doJSON(ctx, http.MethodPost, "/v1/users", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Users lists every user (admins only).
func (c *Client) Users(ctx context.Context) ([]User, error) {
	var out []User
	if err := c.get(ctx, "/v1/users", nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// User returns one user; "me" is the key's owner.
func (c *Client) User(ctx context.Context, id string) (*User, error) {
	var out User
	if err := c.get(ctx, route("/v1/users/", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Usage reports a user's budgets, used and allowed, and the limits a
// session may ask for ("me" for the caller).
func (c *Client) Usage(ctx context.Context, userID string) (*UserUsage, error) {
	var out UserUsage
	if err := c.doJSON(ctx, http.MethodGet, route("/v1/users/", userID, "/usage"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateKey makes an API key for a user ("me" for the caller). The
// returned Key's Secret is the only copy: the server keeps a hash.
func (c *Client) CreateKey(ctx context.Context, userID, name string) (*Key, error) {
	return c.CreateKeyWith(ctx, userID, KeyRequest{Name: name})
}

// CreateKeyWith is CreateKey with every option, such as an expiry.
func (c *Client) CreateKeyWith(ctx context.Context, userID string, req KeyRequest) (*Key, error) {
	var out Key
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/users/", userID, "/keys"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Keys lists a user's keys, without secrets.
func (c *Client) Keys(ctx context.Context, userID string) ([]Key, error) {
	var out []Key
	if err := c.get(ctx, route("/v1/users/", userID, "/keys"), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RevokeKey revokes one of a user's keys; requests with it fail from then on.
func (c *Client) RevokeKey(ctx context.Context, userID, keyID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: route("/v1/users/", userID, "/keys/", keyID)}, nil)
}

// AuditOptions narrows Audit; zero fields match everything.
type AuditOptions struct {
	User    string // a user id
	Session string // a session id
	Actor   string // a user id: entries of what that user did, in any session (User is who was charged)
	Limit   int
	Cursor  string
}

// Audit returns one page of the audit log, oldest first (admins only).
func (c *Client) Audit(ctx context.Context, opts AuditOptions) (*AuditList, error) {
	q := url.Values{}
	if opts.User != "" {
		q.Set("user", opts.User)
	}
	if opts.Session != "" {
		q.Set("session", opts.Session)
	}
	if opts.Actor != "" {
		q.Set("actor", opts.Actor)
	}
	pageQuery(q, opts.Limit, opts.Cursor)
	var out AuditList
	if err := c.get(ctx, "/v1/audit", q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
