package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
)

// Workspace paths are relative to the session's workspace, with "/"
// between names. Leading slashes are dropped, so "/data/a.csv" is
// "data/a.csv". Every name is escaped on its own in the URL, so "?", "#"
// or "%" in a name stay in the name. The client does not clean paths:
// "." and ".." go to the server as they are, and the server refuses what
// would leave the workspace; should a server answer such a path with a
// redirect to a cleaned one, the client reports it instead of following
// (see WithHTTPClient). The client refuses only what no route can carry:
// an empty path where a file or directory other than the root is needed.

// relPath drops the leading slashes of a workspace path.
func relPath(p string) string { return strings.TrimLeft(p, "/") }

// filePath is the escaped route of a workspace path under
// /v1/sessions/{id}/files/; the empty path is the workspace root.
func filePath(sessionID, p string) string {
	segs := strings.Split(relPath(p), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return route("/v1/sessions/", sessionID, "/files/") + strings.Join(segs, "/")
}

var errNoPath = errors.New("kiln client: a workspace path is needed (the root cannot be the target)")

// ListFiles lists a workspace directory; dir "" is the root.
func (c *Client) ListFiles(ctx context.Context, sessionID, dir string) (*FileList, error) {
	path := filePath(sessionID, dir)
	if relPath(dir) == "" {
		path = route("/v1/sessions/", sessionID, "/files")
	}
	var out FileList
	if err := c.get(ctx, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Stat describes one workspace entry.
func (c *Client) Stat(ctx context.Context, sessionID, path string) (*FileInfo, error) {
	var out FileInfo
	if err := c.get(ctx, filePath(sessionID, path), url.Values{"stat": {"true"}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Download copies a workspace file's bytes to w as they arrive and returns
// their content type. A directory's answer is its FileList as JSON: use
// ListFiles or DownloadArchive for directories, Stat to tell them apart.
func (c *Client) Download(ctx context.Context, sessionID, path string, w io.Writer) (contentType string, err error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: filePath(sessionID, path), accept: "*/*"})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return "", fmt.Errorf("kiln client: download %s: %w", path, err)
	}
	return resp.Header.Get("Content-Type"), nil
}

// DownloadArchive writes a workspace directory (dir "" is the root) to w
// as an archive; format is "zip" or "tar".
func (c *Client) DownloadArchive(ctx context.Context, sessionID, dir, format string, w io.Writer) error {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: filePath(sessionID, dir),
		query: url.Values{"archive": {format}}, accept: "*/*"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("kiln client: download %s as %s: %w", dir, format, err)
	}
	return nil
}

// Upload writes r's bytes to a workspace file, streaming them (PUT with
// the raw body). r is read, never closed. Without overwrite an existing file is a conflict
// Problem. It returns the file's FileInfo, or nil when the server sends
// none.
func (c *Client) Upload(ctx context.Context, sessionID, path string, r io.Reader, overwrite bool) (*FileInfo, error) {
	if relPath(path) == "" {
		return nil, errNoPath
	}
	q := url.Values{}
	if !overwrite {
		q.Set("overwrite", "false")
	}
	var out *FileInfo
	err := c.doOptional(ctx, request{method: http.MethodPut, path: filePath(sessionID, path), query: q,
		body: io.NopCloser(r), contentType: "application/octet-stream"}, &out)
	return out, err
}

// UploadMultipart writes files into a workspace directory (dir "" is the
// root) in one multipart/form-data request, one part named "file" per
// file with its Path as the file name. Servers commonly keep only the
// last element of that name, so put files of other directories in
// separate calls or use Extract. Mode is not sent.
func (c *Client) UploadMultipart(ctx context.Context, sessionID, dir string, files []File) (*Uploaded, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range files {
		w, err := mw.CreateFormFile("file", f.Path)
		if err != nil {
			return nil, fmt.Errorf("kiln client: %w", err)
		}
		w.Write(f.Content) // a bytes.Buffer does not fail
	}
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("kiln client: %w", err)
	}
	var out Uploaded
	err := c.do(ctx, request{method: http.MethodPost, path: filePath(sessionID, dir),
		body: &body, contentType: mw.FormDataContentType()}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Extract unpacks an archive, streamed from r (read, never closed), into a workspace directory
// (dir "" is the root); format is "zip" or "tar". The server decides what
// an archive may hold (no links out, no "..").
func (c *Client) Extract(ctx context.Context, sessionID, dir, format string, r io.Reader) (*Uploaded, error) {
	ct := "application/octet-stream"
	switch format {
	case "tar":
		ct = "application/x-tar"
	case "zip":
		ct = "application/zip"
	}
	var out Uploaded
	err := c.do(ctx, request{method: http.MethodPost, path: filePath(sessionID, dir),
		query: url.Values{"extract": {format}}, body: io.NopCloser(r), contentType: ct}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Mkdir makes a workspace directory.
func (c *Client) Mkdir(ctx context.Context, sessionID, path string) (*FileInfo, error) {
	if relPath(path) == "" {
		return nil, errNoPath
	}
	var out FileInfo
	err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/mkdir"),
		map[string]string{"path": relPath(path)}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Move renames a workspace entry; without Overwrite an existing target is
// a conflict Problem.
func (c *Client) Move(ctx context.Context, sessionID string, req MoveRequest) (*FileInfo, error) {
	req.From, req.To = relPath(req.From), relPath(req.To)
	if req.From == "" || req.To == "" {
		return nil, errNoPath
	}
	var out FileInfo
	if err := c.doJSON(ctx, http.MethodPost, route("/v1/sessions/", sessionID, "/move"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteFile deletes a workspace file or directory; a directory that is
// not empty needs recursive.
func (c *Client) DeleteFile(ctx context.Context, sessionID, path string, recursive bool) error {
	if relPath(path) == "" {
		return errNoPath
	}
	q := url.Values{}
	if recursive {
		q.Set("recursive", "true")
	}
	return c.do(ctx, request{method: http.MethodDelete, path: filePath(sessionID, path), query: q}, nil)
}

// doOptional is do for answers that may come without a body: *out stays
// nil unless the server sent JSON.
func (c *Client) doOptional(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/json" {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes+1))
	if err != nil || len(body) == 0 {
		return nil
	}
	if len(body) > maxProblemBytes {
		return fmt.Errorf("kiln client: the answer is larger than %d bytes", maxProblemBytes)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("kiln client: decode answer: %w", err)
	}
	return nil
}
