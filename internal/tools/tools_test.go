package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// The table has every tool the issue names, each with a description an
// agent can act on and a strict object schema that says its limits.
func TestTable(t *testing.T) {
	want := []string{"run_code", "create_session", "execute_code", "install_packages", "list_files", "read_file", "write_file",
		"interrupt", "restart_session", "close_session", "list_languages"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	name := regexp.MustCompile(`^[a-z][a-z_]{0,63}$`) // valid for OpenAI, Anthropic and MCP alike
	for _, tool := range All() {
		if !name.MatchString(tool.Name) {
			t.Errorf("%s: name not valid for every model API", tool.Name)
		}
		if len(tool.Description) < 40 {
			t.Errorf("%s: description %q is too short to act on", tool.Name, tool.Description)
		}
		var s struct {
			Type       string                     `json:"type"`
			Additional *bool                      `json:"additionalProperties"`
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(tool.Schema, &s); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		if s.Type != "object" || s.Additional == nil || *s.Additional {
			t.Errorf("%s: schema must be an object without additional properties", tool.Name)
		}
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				t.Errorf("%s: required %q is not a property", tool.Name, r)
			}
		}
		for p, raw := range s.Properties {
			if !strings.Contains(string(raw), `"description"`) {
				t.Errorf("%s: property %s has no description", tool.Name, p)
			}
		}
	}
	run, _ := Lookup("run_code")
	for _, limit := range []string{`"maximum":86400000`, `"minimum":10`, `"maxLength":1048576`, `"default":"python"`} {
		if !strings.Contains(string(run.Schema), limit) {
			t.Errorf("run_code's schema does not state %s: %s", limit, run.Schema)
		}
	}
}

func TestDefinitions(t *testing.T) {
	for _, c := range []struct {
		format string
		check  func(t *testing.T, m map[string]any)
	}{
		{"openai", func(t *testing.T, m map[string]any) {
			f, _ := m["function"].(map[string]any)
			if m["type"] != "function" || f["name"] == nil || f["description"] == nil || f["parameters"] == nil || len(m) != 2 {
				t.Errorf("not an OpenAI function: %v", m)
			}
		}},
		{"anthropic", func(t *testing.T, m map[string]any) {
			if m["name"] == nil || m["description"] == nil || m["input_schema"] == nil || len(m) != 3 {
				t.Errorf("not an Anthropic tool: %v", m)
			}
		}},
	} {
		d, err := Definitions(c.format)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(d)
		var list []map[string]any
		if err := json.Unmarshal(b, &list); err != nil || len(list) != len(All()) {
			t.Fatalf("%s: %d definitions (%v), want %d", c.format, len(list), err, len(All()))
		}
		for _, m := range list {
			c.check(t, m)
		}
	}
	if _, err := Definitions("gemini"); err == nil || !strings.Contains(err.Error(), "openai") {
		t.Errorf("an unknown format: %v, want an error naming the formats", err)
	}
}

// fakeAPI answers like kiln's API for the routes the tests use.
func fakeAPI(t *testing.T) *client.Client {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/run", func(w http.ResponseWriter, r *http.Request) {
		var req client.RunRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.Language == "klingon" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(400)
			fmt.Fprint(w, `{"status":400,"code":"invalid","detail":"unknown language \"klingon\"; supported languages: python"}`)
			return
		}
		json.NewEncoder(w).Encode(client.RunResult{Result: client.CellResult{Status: "ok", Stdout: "ran " + req.Code}})
	})
	mux.HandleFunc("POST /v1/sessions/{id}/executions", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("a call with progress should stream")
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: started\ndata: {\"type\":\"started\"}\n\n")
		fmt.Fprint(w, "event: stdout\ndata: {\"type\":\"stdout\",\"data\":\"42\\n\"}\n\n")
		x := client.Execution{ID: "x1", Status: "ok", Result: &client.CellResult{Status: "ok", Stdout: "42\n",
			Artifacts: []client.Artifact{{Path: "plots/a b.png", Size: 10, Change: "created"}}}}
		b, _ := json.Marshal(client.Event{Type: "done", Execution: &x})
		fmt.Fprintf(w, "event: done\ndata: %s\n\n", b)
	})
	c, err := InProcess(mux, "k", "192.0.2.1:1234")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kiln's refusals and bad arguments are tool errors with plain messages.
func TestCallErrors(t *testing.T) {
	c := fakeAPI(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, args, want string
	}{
		{"run_code", `{"language": "klingon", "code": "x"}`, `unknown language "klingon"`},
		{"run_code", `{"language": "python"}`, "code"},
		{"run_code", `{"code": "x", "timeout_ms": 5}`, "timeout_ms"},
		{"run_code", `{"code": "x", "colour": "red"}`, "colour"},
		{"run_code", `[1, 2]`, "JSON object"},
		{"run_code", `{"code": "x", "files": [{"path": "a", "content": "1", "content_base64": "MQ=="}]}`, "not both"},
		{"no_such_tool", `{}`, "run_code"},
	} {
		r := Call(ctx, c, tc.name, json.RawMessage(tc.args), nil)
		if !r.IsError || !strings.Contains(r.Text(), tc.want) {
			t.Errorf("%s %s: %+v, want a tool error containing %q", tc.name, tc.args, r, tc.want)
		}
	}
	r := Call(ctx, c, "run_code", json.RawMessage(`{"code": "print(1)"}`), nil)
	if r.IsError || r.Text() != "ran print(1)" {
		t.Errorf("a good call: %+v", r)
	}
}

// execute_code with a listener streams, reports progress, and links the
// files the cell wrote as workspace resources.
func TestExecuteProgressAndLinks(t *testing.T) {
	var msgs []string
	r := Call(context.Background(), fakeAPI(t), "execute_code", json.RawMessage(`{"session_id": "s/1", "code": "print(42)"}`),
		func(m string) { msgs = append(msgs, m) })
	if r.IsError || r.Content[0].Text != "42\n" {
		t.Fatalf("result %+v", r)
	}
	if !slices.Contains(msgs, "started") || !slices.Contains(msgs, "42\n") {
		t.Errorf("progress %q, want started and the output", msgs)
	}
	link := r.Content[len(r.Content)-1]
	if link.Type != PartResourceLink || link.URI != "kiln://sessions/s%2F1/files/plots/a%20b.png" || link.MIMEType != "image/png" {
		t.Errorf("link %+v", link)
	}
	id, p, err := ParseURI(link.URI)
	if id != "s/1" || p != "plots/a b.png" || err != nil {
		t.Errorf("ParseURI: %q %q %v", id, p, err)
	}
	if _, _, err := ParseURI("file:///etc/passwd"); err == nil {
		t.Error("ParseURI took a foreign URI")
	}
}

// A cell's outputs come back in forms a model reads: images as images,
// a table's text form rather than its HTML, the traceback as text.
func TestFromCell(t *testing.T) {
	raw := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	res := &client.CellResult{Status: "error", Stdout: "out\n", Stderr: "warn\n",
		Outputs: []client.Output{
			{Data: map[string]json.RawMessage{"image/png": raw("iVBORw0KGgo="), "text/plain": raw("<Figure>")}},
			{Data: map[string]json.RawMessage{"text/html": raw("<table><tr><td>1</td></tr></table>"), "text/plain": raw("   a\n0  1")}},
			{Data: map[string]json.RawMessage{"text/html": raw("<b>hi</b>")}},
		},
		Error: &client.CellError{Name: "ZeroDivisionError", Message: "division by zero", Traceback: []string{"Traceback:", "  <cell 1> line 1", "ZeroDivisionError: division by zero"}}}
	r := fromCell(res)
	var types, texts []string
	for _, p := range r.Content {
		types = append(types, p.Type)
		texts = append(texts, p.Text)
	}
	if want := []string{"text", "text", "text", "image", "text", "text", "text"}; !slices.Equal(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	if texts[0] != "status: error" || texts[4] != "   a\n0  1" || texts[5] != "<b>hi</b>" || !strings.Contains(texts[6], "ZeroDivisionError: division by zero") {
		t.Errorf("texts %q", texts)
	}
	if string(r.Content[3].Data[:4]) != "\x89PNG" || r.IsError {
		t.Errorf("image %q, is_error %v", r.Content[3].Data, r.IsError)
	}
}

// read_file cuts a long file where asked and says so.
func TestFileContent(t *testing.T) {
	r := fileContent("a.txt", "text/plain", []byte("abc"), true)
	if !strings.Contains(r.Text(), "abc") || !strings.Contains(r.Text(), "max_bytes") {
		t.Errorf("cut text: %q", r.Text())
	}
	r = fileContent("a.bin", "application/octet-stream", []byte{0xff, 0xfe, 0}, false)
	if !strings.Contains(r.Text(), "binary file") {
		t.Errorf("binary: %q", r.Text())
	}
	w := &capWriter{max: 4}
	if _, err := w.Write([]byte("abcdef")); err != errCut || w.buf.String() != "abcd" {
		t.Errorf("capWriter: %v %q", err, w.buf.String())
	}
}

// A limit that stopped the code is a tool error that says which limit
// and what became of the state; an exception is not.
func TestLimitIsToolError(t *testing.T) {
	r := fromCell(&client.CellResult{Status: "timeout", Notice: "the time limit (1s) stopped the cell; the kernel kept its state"})
	if !r.IsError || !strings.Contains(r.Text(), "status: timeout") || !strings.Contains(r.Text(), "kept its state") {
		t.Errorf("timeout: %+v", r)
	}
	for _, st := range []client.CellStatus{"memory_limit", "output_limit"} {
		if r := fromCell(&client.CellResult{Status: st}); !r.IsError {
			t.Errorf("%s: not a tool error", st)
		}
	}
	if r := fromCell(&client.CellResult{Status: "error", Error: &client.CellError{Name: "ValueError"}}); r.IsError {
		t.Errorf("an exception is a tool error: %+v", r)
	}
}
