package openapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// document is openapi.json decoded into plain maps, as a tool reads it.
func document(t *testing.T) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(JSON(), &d); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	return d
}

// resolve follows a local JSON pointer ("#/components/schemas/Session").
func resolve(d map[string]any, ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("%q is not a local reference", ref)
	}
	var cur any = d
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[tok]; !ok {
				return nil, fmt.Errorf("%q: no %q", ref, tok)
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("%q: no element %q", ref, tok)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("%q: %q is inside a scalar", ref, tok)
		}
	}
	return cur, nil
}

// deref returns v, or what its $ref points to.
func deref(t *testing.T, d map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		target, err := resolve(d, ref)
		if err != nil {
			t.Fatal(err)
		}
		m, _ = target.(map[string]any)
	}
	return m
}

// walk calls f on every object in v with its JSON pointer.
func walk(v any, at string, f func(at string, m map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(at, v)
		for k, c := range v {
			walk(c, at+"/"+k, f)
		}
	case []any:
		for i, c := range v {
			walk(c, at+"/"+strconv.Itoa(i), f)
		}
	}
}

func TestHeader(t *testing.T) {
	d := document(t)
	for _, c := range []struct{ ptr, want string }{
		{"#/openapi", "3.1.0"},
		{"#/info/title", "kiln"},
		{"#/servers/0/url", "/"},
		{"#/components/securitySchemes/bearer/type", "http"},
		{"#/components/securitySchemes/bearer/scheme", "bearer"},
	} {
		got, err := resolve(d, c.ptr)
		if err != nil || got != c.want {
			t.Errorf("%s = %v (%v), want %q", c.ptr, got, err, c.want)
		}
	}
	if diff := cmp.Diff([]any{map[string]any{"bearer": []any{}}}, d["security"]); diff != "" {
		t.Errorf("global security (-want +got):\n%s", diff)
	}
}

func TestRefsResolve(t *testing.T) {
	d := document(t)
	n := 0
	walk(d, "#", func(at string, m map[string]any) {
		ref, ok := m["$ref"].(string)
		if !ok {
			return
		}
		n++
		if _, err := resolve(d, ref); err != nil {
			t.Errorf("at %s: %v", at, err)
		}
	})
	if n == 0 {
		t.Fatal("no $ref found; the walk is broken")
	}
}

// Every object schema lives in components/schemas, and every one there is
// used: an unused schema is a sign that the document drifted.
func TestSchemasInComponents(t *testing.T) {
	d := document(t)
	used := map[string]bool{}
	walk(d, "#", func(at string, m map[string]any) {
		if ref, ok := m["$ref"].(string); ok {
			if name, ok := strings.CutPrefix(ref, "#/components/schemas/"); ok {
				used[name] = true
			}
		}
		if _, ok := m["properties"]; ok && !strings.HasPrefix(at, "#/components/schemas/") {
			t.Errorf("inline object schema at %s; move it to components/schemas", at)
		}
	})
	schemas, _ := resolve(d, "#/components/schemas")
	for name := range schemas.(map[string]any) {
		if !used[name] {
			t.Errorf("schema %s is never referenced", name)
		}
	}
}

func TestOperations(t *testing.T) {
	d := document(t)
	ids := map[string]Operation{}
	var open []Operation
	for _, op := range Operations() {
		o := deref(t, d, mustResolve(t, d, "#/paths/"+escape(op.Path)+"/"+strings.ToLower(op.Method)))
		id, _ := o["operationId"].(string)
		if id == "" {
			t.Errorf("%v has no operationId", op)
		} else if prev, dup := ids[id]; dup {
			t.Errorf("operationId %q of %v is also %v's", id, op, prev)
		}
		ids[id] = op

		if sec, ok := o["security"].([]any); ok && len(sec) == 0 {
			open = append(open, op)
		}

		var success, problem bool
		for code, r := range o["responses"].(map[string]any) {
			// A WebSocket upgrade succeeds with 101, never 2xx.
			if strings.HasPrefix(code, "2") || code == "101" {
				success = true
			}
			if code != "default" && code < "400" {
				continue
			}
			content, _ := deref(t, d, r)["content"].(map[string]any)
			pj, _ := content["application/problem+json"].(map[string]any)
			if s, _ := pj["schema"].(map[string]any); s["$ref"] == "#/components/schemas/Problem" {
				problem = true
			} else {
				t.Errorf("%v: response %s is not a Problem", op, code)
			}
		}
		if !success {
			t.Errorf("%v has no 2xx response", op)
		}
		if !problem {
			t.Errorf("%v has no problem response", op)
		}
	}

	// The routes that need no key are exactly these.
	want := []Operation{
		{"GET", "/v1/health/live"},
		{"GET", "/v1/health/ready"},
		{"GET", "/v1/openapi.json"},
	}
	if diff := cmp.Diff(want, open); diff != "" {
		t.Errorf("operations without security (-want +got):\n%s", diff)
	}
}

// Every {name} of a path template is declared as a path parameter, and
// nothing else is.
func TestPathParameters(t *testing.T) {
	d := document(t)
	for _, op := range Operations() {
		item := mustResolve(t, d, "#/paths/"+escape(op.Path)).(map[string]any)
		var declared []string
		for _, level := range []any{item["parameters"], deref(t, d, item[strings.ToLower(op.Method)])["parameters"]} {
			ps, _ := level.([]any)
			for _, p := range ps {
				p := deref(t, d, p)
				if p["in"] == "path" {
					if p["required"] != true {
						t.Errorf("%v: path parameter %v is not required", op, p["name"])
					}
					declared = append(declared, p["name"].(string))
				}
			}
		}
		var want []string
		for _, seg := range strings.Split(op.Path, "/") {
			if name, ok := strings.CutPrefix(seg, "{"); ok {
				want = append(want, strings.TrimSuffix(name, "}"))
			}
		}
		slices.Sort(declared)
		slices.Sort(want)
		if diff := cmp.Diff(want, declared); diff != "" {
			t.Errorf("%v path parameters (-template +declared):\n%s", op, diff)
		}
	}
}

func TestProblemCodes(t *testing.T) {
	want := []any{
		"invalid", "not_found", "unauthenticated", "forbidden", "conflict",
		"rate_limited", "quota_exceeded", "too_large", "unavailable", "queue_full",
		"unsupported_media_type", "method_not_allowed", "internal", "sandbox_error",
		"unsupported", "request_timeout",
	}
	got := mustResolve(t, document(t), "#/components/schemas/Problem/properties/code/enum")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Problem.code enum (-want +got):\n%s", diff)
	}
}

func mustResolve(t *testing.T, d map[string]any, ref string) any {
	t.Helper()
	v, err := resolve(d, ref)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// escape makes a path template one JSON pointer token.
func escape(path string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(path)
}
