// Package mcp serves kiln's tools (internal/tools) over the Model Context
// Protocol with the official Go SDK: on stdio for `kiln mcp`, and as
// streamable HTTP at /mcp on kiln serve. It is an adapter only: each tool
// call goes to kiln's HTTP API through a client.Client that ClientFunc
// gives, so MCP has the REST API's auth, limits, quotas, audit and
// history.
package mcp

import (
	"context"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/tools"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ClientFunc gives the kiln client that serves one MCP request: a fixed
// one on stdio, one with the request's API key on HTTP.
type ClientFunc func(ctx context.Context, extra *sdk.RequestExtra) (*client.Client, error)

// maxResourceBytes bounds a workspace file read as a resource.
const maxResourceBytes = 8 << 20

const instructions = "kiln runs code in isolated sandboxes, with no network unless a session's or run's policy allows hosts. Use run_code for a one-off program; " +
	"create_session, then execute_code, to keep variables and files between calls; close_session when done. " +
	"A session created with network {\"mode\": \"allowlist\"} can install_packages (pip, npm), and run_code takes the same network with packages; each result lists its network attempts, denied ones with the reason. " +
	"Files a cell writes come back as resource links (" + tools.FileTemplate + ") that resources/read fetches."

// NewServer returns an MCP server of kiln's tools, and of the sessions'
// workspace files as resources.
func NewServer(version string, cf ClientFunc) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "kiln", Title: "kiln code interpreter", Version: version},
		&sdk.ServerOptions{Instructions: instructions})
	for _, t := range tools.All() {
		destructive := t.Destructive
		s.AddTool(&sdk.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Schema,
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: t.ReadOnly, DestructiveHint: &destructive, OpenWorldHint: new(bool)}},
			toolHandler(t.Name, cf))
	}
	s.AddResourceTemplate(&sdk.ResourceTemplate{Name: "workspace-file", Title: "A file of a kiln session's workspace",
		URITemplate: tools.FileTemplate, Description: "The bytes of a file in a session's workspace (at most 8 MiB)."},
		resourceHandler(cf))
	return s
}

func toolHandler(name string, cf ClientFunc) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		c, err := cf(ctx, req.Extra)
		if err != nil {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}, IsError: true}, nil
		}
		r := tools.Call(ctx, c, name, req.Params.Arguments, progress(ctx, req))
		return toMCP(r), nil
	}
}

// progress sends MCP progress notifications when the caller asked for
// them with a progress token.
func progress(ctx context.Context, req *sdk.CallToolRequest) tools.Progress {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return nil
	}
	n := 0
	return func(msg string) {
		n++
		// A lost notification is not worth failing the call for.
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Message: msg, Progress: float64(n)})
	}
}

// toMCP turns a tool result into MCP content.
func toMCP(r *tools.Result) *sdk.CallToolResult {
	out := &sdk.CallToolResult{IsError: r.IsError, Content: []sdk.Content{}}
	for _, p := range r.Content {
		switch p.Type {
		case tools.PartImage:
			out.Content = append(out.Content, &sdk.ImageContent{MIMEType: p.MIMEType, Data: p.Data})
		case tools.PartResourceLink:
			size := p.Size
			out.Content = append(out.Content, &sdk.ResourceLink{URI: p.URI, Name: p.Name, MIMEType: p.MIMEType, Size: &size})
		default:
			out.Content = append(out.Content, &sdk.TextContent{Text: p.Text})
		}
	}
	return out
}

func resourceHandler(cf ClientFunc) sdk.ResourceHandler {
	return func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		id, path, err := tools.ParseURI(req.Params.URI)
		if err != nil {
			return nil, err
		}
		c, err := cf(ctx, req.Extra)
		if err != nil {
			return nil, err
		}
		w := &limitBuffer{max: maxResourceBytes}
		ctype, err := c.Download(ctx, id, path, w)
		var p *client.Problem
		switch {
		case errors.As(err, &p) && p.Status == http.StatusNotFound:
			return nil, sdk.ResourceNotFoundError(req.Params.URI)
		case errors.Is(err, errTooLarge):
			return nil, errors.New("the file is larger than 8 MiB; read it in parts with code, or with kiln's files API")
		case err != nil:
			return nil, err
		}
		rc := &sdk.ResourceContents{URI: req.Params.URI, MIMEType: ctype}
		if utf8.Valid(w.b) {
			rc.Text = string(w.b)
		} else {
			rc.Blob = w.b
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
	}
}

var errTooLarge = errors.New("too large")

type limitBuffer struct {
	b   []byte
	max int
}

func (l *limitBuffer) Write(p []byte) (int, error) {
	if len(l.b)+len(p) > l.max {
		return 0, errTooLarge
	}
	l.b = append(l.b, p...)
	return len(p), nil
}

// StdioClient is the ClientFunc of a single client (stdio: one user).
func StdioClient(c *client.Client) ClientFunc {
	return func(context.Context, *sdk.RequestExtra) (*client.Client, error) { return c, nil }
}

// Serve runs the server on stdin and stdout until the host closes them
// or ctx ends.
func Serve(ctx context.Context, s *sdk.Server) error {
	err := s.Run(ctx, &sdk.StdioTransport{})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
