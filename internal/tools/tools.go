// Package tools is kiln's one table of agent tools: their names,
// descriptions and JSON schemas, and how each call is carried out. Every
// tool is an adapter over kiln's own HTTP API through the Go client, so a
// call has exactly the REST API's auth, ownership, limits, quotas, audit
// and history. The MCP server (internal/mcp) and the function-calling
// routes (GET /v1/tools, POST /v1/tools/call) both serve this table.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/kiln-dev/kiln/client"
)

// Tool is one tool of the table.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema (2020-12) of the arguments: an object.
	Schema json.RawMessage
	// ReadOnly and Destructive are hints for hosts (MCP annotations).
	ReadOnly, Destructive bool

	resolved *jsonschema.Resolved
	call     func(ctx context.Context, c *client.Client, args json.RawMessage, p Progress) (*Result, error)
}

// Progress hears what a long call is doing (a queued cell, output as it
// comes); nil when the caller does not listen.
type Progress func(message string)

// Part is one piece of a result, in the order a model should read them;
// it is the API's ToolContent.
type Part = client.ToolContent

// Part types.
const (
	PartText         = "text"
	PartImage        = "image"
	PartResourceLink = "resource_link"
)

// Result is a tool call's answer. IsError says that kiln refused or
// could not do the call (an unknown language, a limit or a quota refused,
// bad arguments) or that a limit stopped the code (time, memory,
// output); code that ran and raised is a result like any other, with its
// error and traceback in the text.
type Result struct {
	Content []Part `json:"content"`
	IsError bool   `json:"is_error"`
}

// Text joins the result's text parts, and names the other parts, for a
// model API whose tool results are a string.
func (r *Result) Text() string {
	var b strings.Builder
	for _, p := range r.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch p.Type {
		case PartText:
			b.WriteString(p.Text)
		case PartImage:
			fmt.Fprintf(&b, "[%s image, %d bytes]", p.MIMEType, len(p.Data))
		case PartResourceLink:
			fmt.Fprintf(&b, "[file %s, %d bytes: %s]", p.Name, p.Size, p.URI)
		}
	}
	return b.String()
}

func textResult(s string) *Result { return &Result{Content: []Part{{Type: PartText, Text: s}}} }

func errorResult(s string) *Result {
	return &Result{Content: []Part{{Type: PartText, Text: s}}, IsError: true}
}

// All returns the table, in a stable order.
func All() []Tool { return slices.Clone(tools()) }

// Lookup finds a tool by name.
func Lookup(name string) (Tool, bool) {
	i := slices.IndexFunc(tools(), func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return Tool{}, false
	}
	return tools()[i], true
}

// Names lists the tools' names, for error messages.
func Names() []string {
	n := make([]string, len(tools()))
	for i, t := range tools() {
		n[i] = t.Name
	}
	return n
}

// Call carries out one call of the named tool with c. Every failure,
// kiln's or the arguments', comes back as a Result with IsError and a
// plain message; Call itself never fails.
func Call(ctx context.Context, c *client.Client, name string, args json.RawMessage, p Progress) *Result {
	t, ok := Lookup(name)
	if !ok {
		return errorResult(fmt.Sprintf("there is no tool %q; kiln's tools are %s", name, strings.Join(Names(), ", ")))
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if err := t.validate(args); err != nil {
		return errorResult(fmt.Sprintf("%s: %v", name, err))
	}
	r, err := t.call(ctx, c, args, p)
	if err != nil {
		return errorResult(plainError(err))
	}
	return r
}

// validate checks args against the tool's schema.
func (t Tool) validate(args json.RawMessage) error {
	var plain map[string]any
	if err := json.Unmarshal(args, &plain); err != nil || plain == nil {
		return errors.New("the arguments must be a JSON object")
	}
	if err := t.resolved.Validate(plain); err != nil {
		return fmt.Errorf("invalid arguments: %v (see the tool's input schema)", err)
	}
	return nil
}

// decode reads validated arguments into a struct, refusing fields the
// schema does not have.
func decode(args json.RawMessage, out any) error {
	d := json.NewDecoder(bytes.NewReader(args))
	d.DisallowUnknownFields()
	if err := d.Decode(out); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

// plainError is an error's message for a model: a kiln Problem's detail
// (it says what was wrong and what is allowed), else the error.
func plainError(err error) string {
	var p *client.Problem
	if errors.As(err, &p) {
		msg := p.Detail
		if p.RetryAfterSeconds > 0 {
			msg += fmt.Sprintf(" (retry after %d s)", p.RetryAfterSeconds)
		}
		return fmt.Sprintf("kiln refused the call (%s): %s", p.Code, msg)
	}
	if errors.Is(err, context.Canceled) {
		return "the call was cancelled"
	}
	return "kiln could not do the call: " + err.Error()
}

// mustResolve compiles every schema of the table once, at start: a
// broken schema is a programming error.
func mustResolve(ts []Tool) []Tool {
	for i := range ts {
		var s jsonschema.Schema
		if err := json.Unmarshal(ts[i].Schema, &s); err != nil {
			panic(fmt.Sprintf("tool %s: schema: %v", ts[i].Name, err))
		}
		r, err := s.Resolve(nil)
		if err != nil {
			panic(fmt.Sprintf("tool %s: schema: %v", ts[i].Name, err))
		}
		ts[i].resolved = r
	}
	return ts
}
