package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// ToolCall is one call of a kiln tool as a model made it
// (POST /v1/tools/call). Arguments is a JSON object, or a JSON string
// holding one (as OpenAI's API gives them).
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ToolCallResult is a tool call's answer, ready for the model: Text as a
// string tool result, or Content's parts (images among them) for an API
// that takes blocks. IsError says kiln refused the call or a limit
// stopped the code; an exception in the code is an ordinary result.
type ToolCallResult struct {
	Name    string        `json:"name"`
	IsError bool          `json:"is_error"`
	Text    string        `json:"text"`
	Content []ToolContent `json:"content"`
}

// ToolContent is one part of a tool result.
type ToolContent struct {
	Type     string `json:"type"` // text, image, resource_link
	Text     string `json:"text,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	Data     []byte `json:"data,omitempty"` // an image, base64 in JSON
	URI      string `json:"uri,omitempty"`  // a resource link: kiln://sessions/{id}/files/{path}
	Name     string `json:"name,omitempty"`
	Size     int64  `json:"size,omitempty"`
}

// Tools returns kiln's tools as function definitions in format ("openai"
// or "anthropic"; "" is openai), as JSON to hand to a model API as it is.
func (c *Client) Tools(ctx context.Context, format string) (json.RawMessage, error) {
	q := url.Values{}
	if format != "" {
		q.Set("format", format)
	}
	var out json.RawMessage
	if err := c.get(ctx, "/v1/tools", q, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// CallTool carries out one tool call that a model made.
func (c *Client) CallTool(ctx context.Context, call ToolCall) (*ToolCallResult, error) {
	var out ToolCallResult
	if err := c.doJSON(ctx, http.MethodPost, "/v1/tools/call", call, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
