package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Bounds on what the client reads from a server, so that a broken or
// hostile server cannot make it buffer without end.
const (
	maxJSONBytes    = 256 << 20 // one JSON answer (a RunResult carries files)
	maxEventBytes   = 64 << 20  // one stream event (the done event carries the result)
	maxProblemBytes = 64 << 10  // an error answer's body
)

// Client talks to one kiln server with one API key. It is safe for
// concurrent use.
type Client struct {
	base      *url.URL // scheme, host and an optional path prefix
	key       string
	hc        *http.Client
	userAgent string
}

// Option changes how New builds a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (its transport, timeouts,
// cookies). The client uses a copy whose CheckRedirect refuses redirects:
// the API never redirects, and following one could turn a request into a
// different route (a server that cleans "a/../b" answers with a redirect).
// hc.Timeout also bounds streams; prefer a context deadline per call.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			cp := *hc
			c.hc = &cp
		}
	}
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// DefaultUserAgent is the User-Agent unless WithUserAgent says otherwise.
const DefaultUserAgent = "kiln-go-client"

// New returns a client of the server at baseURL (http or https, with an
// optional path prefix such as https://example.com/kiln) that authenticates
// with key. An empty key is allowed: the health routes need none.
func New(baseURL, key string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("kiln client: server URL %q: want http:// or https:// and a host, e.g. http://127.0.0.1:8420", baseURL)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("kiln client: server URL %q: want scheme://host[:port][/prefix] without user, query or fragment", baseURL)
	}
	if strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, errors.New("kiln client: the API key contains spaces or control characters")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	c := &Client{base: u, key: key, hc: &http.Client{}, userAgent: DefaultUserAgent}
	for _, o := range opts {
		o(c)
	}
	c.hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		return fmt.Errorf("the server redirected to %s; kiln's API never redirects, so the request was not repeated there", req.URL.Redacted())
	}
	return c, nil
}

// endpoint is the URL of an API path given as already escaped segments,
// joined under the base URL's prefix.
func (c *Client) endpoint(escapedPath string, q url.Values) *url.URL {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + escapedPath
	// RawPath is a valid escaping by construction, so unescaping succeeds.
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = q.Encode()
	return &u
}

// route builds an escaped path from literal parts and parameters: every
// part is escaped as one segment, so an id holding "/" or "?" cannot
// reach another route. Literal parts are written with their slashes,
// e.g. route("/v1/sessions/", id, "/interrupt").
func route(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 0 {
			b.WriteString(p) // literal
		} else {
			b.WriteString(url.PathEscape(p))
		}
	}
	return b.String()
}

// request is one API call's description.
type request struct {
	method      string
	path        string // escaped, from route or filePath
	query       url.Values
	body        io.Reader
	contentType string
	accept      string
	noAuth      bool
}

// send performs r and returns the response when its status is 2xx; any
// other answer becomes a *Problem. The caller closes the body.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.method, c.endpoint(r.path, r.query).String(), r.body)
	if err != nil {
		return nil, fmt.Errorf("kiln client: %w", err)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.accept == "" {
		r.accept = "application/json"
	}
	req.Header.Set("Accept", r.accept)
	c.authorize(req.Header, r.noAuth)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, problemFrom(resp)
	}
	return resp, nil
}

func (c *Client) authorize(h http.Header, noAuth bool) {
	if c.userAgent != "" {
		h.Set("User-Agent", c.userAgent)
	}
	if c.key != "" && !noAuth {
		h.Set("Authorization", "Bearer "+c.key)
	}
}

// do performs r and decodes a JSON answer into out (nil: the body is
// discarded, as for 204).
func (c *Client) do(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		// Read a short body to its end, so the connection can be reused.
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxProblemBytes))
		return nil
	}
	return decodeJSON(resp.Body, maxJSONBytes, out)
}

// doJSON is do with in encoded as the JSON body.
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("kiln client: encode request: %w", err)
	}
	return c.do(ctx, request{method: method, path: path, body: bytes.NewReader(b), contentType: "application/json"}, out)
}

func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, request{method: http.MethodGet, path: path, query: q}, out)
}

// decodeJSON reads one JSON value of at most max bytes.
func decodeJSON(r io.Reader, max int64, out any) error {
	lr := &io.LimitedReader{R: r, N: max + 1}
	if err := json.NewDecoder(lr).Decode(out); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("kiln client: the answer is larger than %d bytes", max)
		}
		return fmt.Errorf("kiln client: decode answer: %w", err)
	}
	return nil
}
