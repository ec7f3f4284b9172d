// Package openapi holds the OpenAPI 3.1 document of kiln's HTTP API,
// written by hand and embedded, so the binary serves the exact document
// that was reviewed. Operations lists what the document promises so that
// the server's tests can compare it with the routes the mux really has.
package openapi

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

//go:embed openapi.json
var doc string

// JSON returns the document. Each call returns a fresh copy, so a caller
// cannot change what the next caller sees.
func JSON() []byte { return []byte(doc) }

// Operation is one method on one path template of the document, e.g.
// {"GET", "/v1/sessions/{id}/files/{path}"}.
type Operation struct {
	Method string
	Path   string
}

// methods are the keys of an OpenAPI path item that name operations; the
// others (parameters, summary, ...) do not.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Operations returns every operation of the document, sorted by path and
// then method.
func Operations() []Operation {
	return append([]Operation(nil), operations()...)
}

var operations = sync.OnceValue(func() []Operation {
	ops, err := parseOperations([]byte(doc))
	if err != nil {
		// The document is compiled in and its tests parse it, so this is
		// a build of a broken document, not a runtime condition.
		panic(err)
	}
	return ops
})

func parseOperations(b []byte) ([]Operation, error) {
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("parse openapi.json: %w", err)
	}
	var ops []Operation
	for path, item := range d.Paths {
		for _, m := range methods {
			if _, ok := item[m]; ok {
				ops = append(ops, Operation{Method: strings.ToUpper(m), Path: path})
			}
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	return ops, nil
}
