// Package openapitest checks real HTTP responses against kiln's OpenAPI
// document: for every response, that the operation documents its status,
// that its Content-Type is one the status documents, and that its body
// (each event of a stream, each message of a WebSocket) validates against
// the schema with a JSON Schema 2020-12 validator. The server's tests
// wrap their handler in Handler, so every request they make is checked.
package openapitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/kiln-dev/kiln/internal/server/openapi"
)

// maxBody bounds what is kept of one body to validate; the tests' JSON
// answers are far smaller.
const maxBody = 16 << 20

// Checker validates responses and keeps every mismatch it saw.
type Checker struct {
	doc     map[string]any
	defs    any // components.schemas, as $defs of every schema
	ops     []op
	mu      sync.Mutex
	errs    []string
	schemas map[string]*jsonschema.Resolved
}

type op struct {
	method string
	path   string // the document's template
	re     *regexp.Regexp
	node   map[string]any
}

// New parses the embedded document.
func New() (*Checker, error) {
	// Schemas refer to each other as #/components/schemas/X; validated on
	// their own, the same definitions travel as #/$defs/X.
	text := strings.ReplaceAll(string(openapi.JSON()), "#/components/schemas/", "#/$defs/")
	var doc map[string]any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		return nil, err
	}
	c := &Checker{doc: doc, schemas: map[string]*jsonschema.Resolved{}}
	c.defs = obj(obj(doc["components"])["schemas"])
	for path, item := range obj(doc["paths"]) {
		re := "^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllStringFunc(regexp.QuoteMeta(path), func(p string) string {
			if p == `\{path\}` {
				return ".*" // a workspace path, slashes and all
			}
			return "[^/]*" // empty too: the server answers a missing id itself
		}) + "$"
		for m, node := range obj(item) {
			if n, ok := node.(map[string]any); ok && n["responses"] != nil {
				c.ops = append(c.ops, op{strings.ToUpper(m), path, regexp.MustCompile(re), n})
			}
		}
	}
	return c, nil
}

// Errors returns every mismatch seen so far.
func (c *Checker) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.errs)
}

func (c *Checker) fail(r *http.Request, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf("%s %s: ", r.Method, r.URL.Path)+fmt.Sprintf(format, args...))
}

// Handler serves h and checks each of its answers.
func (c *Checker) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w, c: c, r: r}
		h.ServeHTTP(rec, r)
		if !rec.hijacked {
			c.check(r, rec)
		}
	})
}

// find returns the operation of r, the path's other methods when the
// method is not documented, and false when the document has no such path.
func (c *Checker) find(r *http.Request) (*op, []string, bool) {
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet // net/http serves HEAD with the GET handler
	}
	var allowed []string
	for i := range c.ops {
		o := &c.ops[i]
		if !o.re.MatchString(r.URL.Path) {
			continue
		}
		if o.method == method {
			return o, nil, true
		}
		allowed = append(allowed, o.method)
	}
	return nil, allowed, len(allowed) > 0
}

func (c *Checker) check(r *http.Request, rec *recorder) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	o, allowed, known := c.find(r)
	if !known {
		if strings.HasPrefix(r.URL.Path, "/v1/") && status != http.StatusNotFound {
			c.fail(r, "no such path in the document, but answered %d (want 404)", status)
		}
		return // the web UI and /mcp are not part of the document
	}
	if o == nil {
		if status != http.StatusMethodNotAllowed {
			c.fail(r, "method not in the document for this path (allowed %v), but answered %d (want 405 method_not_allowed)", allowed, status)
		} else if rec.Header().Get("Allow") == "" {
			c.fail(r, "a 405 without Allow")
		}
		c.checkBody(r, rec, c.response(obj(obj(c.doc["components"])["responses"])["Error"]))
		return
	}
	resp := c.responseFor(o, status)
	if resp == nil {
		c.fail(r, "status %d is not documented for %s %s", status, o.method, o.path)
		return
	}
	c.checkBody(r, rec, resp)
}

// responseFor is the documented response of o for status, or default.
func (c *Checker) responseFor(o *op, status int) map[string]any {
	rs := obj(o.node["responses"])
	if v, ok := rs[strconv.Itoa(status)]; ok {
		return c.response(v)
	}
	if v, ok := rs["default"]; ok && status >= 400 {
		return c.response(v)
	}
	return nil
}

// response follows a response $ref.
func (c *Checker) response(v any) map[string]any {
	m := obj(v)
	if ref, ok := m["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/responses/")
		return obj(obj(obj(c.doc["components"])["responses"])[name])
	}
	return m
}

func (c *Checker) checkBody(r *http.Request, rec *recorder, resp map[string]any) {
	content := obj(resp["content"])
	if len(content) == 0 {
		return
	}
	mt, _, err := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	if err != nil {
		c.fail(r, "Content-Type %q: %v", rec.Header().Get("Content-Type"), err)
		return
	}
	if strings.HasPrefix(rec.Header().Get("Content-Disposition"), "attachment") {
		// A workspace file's bytes, typed by its name: the document's
		// media range */* covers them, and there is no schema to check.
		if _, ok := content["*/*"]; ok {
			return
		}
	}
	media, ok := content[mt]
	if !ok {
		c.fail(r, "Content-Type %s is not documented for status %d (documented: %v)", mt, rec.statusOr200(), keys(content))
		return
	}
	if rec.truncated {
		return
	}
	switch {
	case mt == "text/event-stream":
		c.checkEvents(r, rec.body.Bytes(), obj(media)["x-kiln-event"])
	case strings.HasSuffix(mt, "json"):
		if s := obj(media)["schema"]; s != nil {
			c.validate(r, fmt.Sprintf("the %d body", rec.statusOr200()), s, rec.body.Bytes())
		}
	}
}

// checkEvents validates the data of each server-sent event.
func (c *Checker) checkEvents(r *http.Request, stream []byte, schema any) {
	if schema == nil {
		return
	}
	for block := range strings.SplitSeq(string(stream), "\n\n") {
		var data []string
		for line := range strings.SplitSeq(block, "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " "))
			}
		}
		if len(data) > 0 {
			c.validate(r, "an event", schema, []byte(strings.Join(data, "\n")))
		}
	}
}

// validate checks body against schema (a schema object of the document).
func (c *Checker) validate(r *http.Request, what string, schema any, body []byte) {
	rs, err := c.resolved(schema)
	if err != nil {
		c.fail(r, "the document's schema for %s does not resolve: %v", what, err)
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		c.fail(r, "%s is not JSON: %v: %.200q", what, err, body)
		return
	}
	if err := rs.Validate(v); err != nil {
		c.fail(r, "%s does not match the document: %v\n  body: %.2000s", what, err, body)
	}
}

func (c *Checker) resolved(schema any) (*jsonschema.Resolved, error) {
	key, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rs, ok := c.schemas[string(key)]; ok {
		return rs, nil
	}
	root := map[string]any{"$defs": c.defs}
	for k, v := range obj(schema) {
		root[k] = v
	}
	b, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, err
	}
	c.schemas[string(key)] = rs
	return rs, nil
}

// recorder passes the response through and keeps what is checked.
type recorder struct {
	http.ResponseWriter
	c         *Checker
	r         *http.Request
	status    int
	body      bytes.Buffer
	truncated bool
	hijacked  bool
}

func (w *recorder) statusOr200() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body.Len()+len(p) > maxBody {
		w.truncated = true
	} else if !w.truncated {
		w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *recorder) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the real writer's deadlines.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands over a connection whose WebSocket messages are checked:
// the server's against the operation's x-kiln-messages.server schema and
// the client's against x-kiln-messages.client.
func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return conn, brw, err
	}
	w.hijacked = true
	o, _, _ := w.c.find(w.r)
	if o == nil && !strings.HasPrefix(w.r.URL.Path, "/v1/") {
		return conn, brw, nil // the Jupyter gateway's channels are not part of the document
	}
	if o == nil {
		w.c.fail(w.r, "a hijacked connection on an undocumented operation")
		return conn, brw, nil
	}
	if obj(o.node["responses"])["101"] == nil {
		w.c.fail(w.r, "switched protocols, but 101 is not documented")
	}
	msgs := obj(o.node["x-kiln-messages"])
	wc := &wsConn{Conn: conn, c: w.c, r: w.r, server: msgs["server"], client: msgs["client"]}
	wc.out.mask = false
	wc.in.mask = true
	// The buffered reader may already hold the client's first bytes; the
	// rest, and everything written, must pass through wc.
	b, _ := brw.Reader.Peek(brw.Reader.Buffered())
	wc.pending = bytes.Clone(b)
	wc.in.feed(wc.pending, wc.message(true))
	r := bufio.NewReaderSize(wc, brw.Reader.Size())
	return wc, bufio.NewReadWriter(r, bufio.NewWriterSize(wc, brw.Writer.Size())), nil
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
