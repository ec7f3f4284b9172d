package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// The web notebook keeps its cells and outputs in the session's
// workspace under this name (web/src/notebook.ts, docs/NOTEBOOK.md).
const notebookFile = ".kiln-notebook.json"

// maxNotebookBytes bounds the notebook file that an export reads.
const maxNotebookBytes = 64 << 20

// exportCSP is the exported page's own policy (a meta element, so that
// it holds when the file is opened from disk): no script, no
// connection; images only inline. HTML outputs sit in frames sandboxed
// without scripts.
const exportCSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-src 'self'"

// The notebook file as the web notebook writes it; unknown fields are
// ignored and missing ones are empty.
type nbDoc struct {
	Format string   `json:"format"`
	Cells  []nbCell `json:"cells"`
}

type nbCell struct {
	Type     string  `json:"type"`
	Language string  `json:"language"`
	Source   string  `json:"source"`
	Status   string  `json:"status"`
	Seq      int     `json:"seq"`
	Outputs  []nbOut `json:"outputs"`
}

type nbOut struct {
	Kind      string         `json:"kind"` // stream, display, error, notice
	Name      string         `json:"name"`
	Text      string         `json:"text"`
	Message   string         `json:"message"`
	Traceback []string       `json:"traceback"`
	Data      map[string]any `json:"data"`
}

// exportNotebook serves the session's saved notebook as one standalone
// HTML file (GET /v1/sessions/{id}/export?format=html): cells, outputs
// and images inline, markdown rendered, nothing fetched and no script.
func (s *Server) exportNotebook(w http.ResponseWriter, r *http.Request, c *call) error {
	if f := r.URL.Query().Get("format"); f != "html" {
		return kiln.Errorf(kiln.Invalid, "format %q is not supported; allowed: html", trunc(f, 40))
	}
	id := r.PathValue("id")
	files := s.svc.Files(c.user, id)
	defer files.Close()
	var buf bytes.Buffer
	lw := &capWriter{w: &buf, left: maxNotebookBytes}
	if err := files.Read(r.Context(), notebookFile, lw); err != nil {
		if kiln.KindOf(err) == kiln.NotFound && lw.n == 0 {
			if _, serr := s.svc.Session(r.Context(), c.user, id); serr != nil {
				return serr
			}
			return kiln.Errorf(kiln.NotFound, "the session has no saved notebook (%s): open it in the web notebook, which saves it", notebookFile)
		}
		if lw.over {
			return kiln.Errorf(kiln.TooLarge, "the notebook file is over %s, the most an export reads", kiln.FormatBytes(maxNotebookBytes))
		}
		return err
	}
	var doc nbDoc
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || doc.Format != "kiln-notebook" {
		return kiln.Errorf(kiln.Invalid, "%s is not a kiln notebook (format kiln-notebook, version 1); it may have been edited by hand", notebookFile)
	}
	page, err := renderNotebook(id, doc, time.Now())
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Disposition", disposition("kiln-"+id+".html"))
	// The export is user content: never a page of this origin.
	h.Set("Content-Security-Policy", "sandbox; "+exportCSP)
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(page)
	return err
}

// capWriter passes at most left bytes and then fails.
type capWriter struct {
	w    *bytes.Buffer
	left int64
	n    int64
	over bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.over = true
		return 0, fmt.Errorf("over %d bytes", maxNotebookBytes)
	}
	c.left -= int64(len(p))
	c.n += int64(len(p))
	return c.w.Write(p)
}

// Built on first use, not at package init: every sandbox stage is this
// binary and pays for what its packages' init does (cmd/kiln's
// TestSandboxStagesInitIsLight).
var (
	exportMarkdown = sync.OnceValue(func() goldmark.Markdown {
		return goldmark.New(goldmark.WithExtensions(extension.GFM)) // raw HTML and dangerous links are left out by default
	})
	ansiCodes  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`) })
	base64Text = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9+/]*={0,2}$`) })
)

type exportCell struct {
	Markdown bool
	HTML     template.HTML // a markdown cell, rendered
	Language string
	Source   string
	Head     string
	Outputs  []exportOut
}

// exportOut is one output: exactly one field is set.
type exportOut struct {
	Stream, Stderr string
	Text           string // text/plain, JSON
	Image          template.URL
	Frame          string // HTML, shown in a frame without scripts
	Markdown       template.HTML
	Error          string
	Notice         string
}

func renderNotebook(id string, doc nbDoc, now time.Time) ([]byte, error) {
	cells := make([]exportCell, 0, len(doc.Cells))
	for _, c := range doc.Cells {
		if c.Type == "markdown" {
			cells = append(cells, exportCell{Markdown: true, HTML: exportMD(c.Source)})
			continue
		}
		head := c.Language
		if c.Seq > 0 {
			head = fmt.Sprintf("[%d] %s", c.Seq, head)
		}
		if c.Status != "" {
			head += " · " + c.Status
		}
		ec := exportCell{Language: c.Language, Source: c.Source, Head: head}
		for _, o := range c.Outputs {
			ec.Outputs = append(ec.Outputs, exportOutput(o))
		}
		cells = append(cells, ec)
	}
	var b bytes.Buffer
	err := exportPage().Execute(&b, map[string]any{"ID": id, "Cells": cells, "When": now.UTC().Format("2006-01-02 15:04 UTC"), "CSP": exportCSP})
	return b.Bytes(), err
}

func exportMD(src string) template.HTML {
	var b bytes.Buffer
	if err := exportMarkdown().Convert([]byte(src), &b); err != nil {
		return template.HTML(template.HTMLEscapeString(src))
	}
	return template.HTML(b.String()) // goldmark without WithUnsafe: no raw HTML, no javascript: links
}

func exportOutput(o nbOut) exportOut {
	switch o.Kind {
	case "stream":
		if o.Name == "stderr" {
			return exportOut{Stderr: ansiCodes().ReplaceAllString(o.Text, "")}
		}
		return exportOut{Stream: ansiCodes().ReplaceAllString(o.Text, "")}
	case "error":
		t := o.Name + ": " + o.Message
		if len(o.Traceback) > 0 {
			t += "\n" + strings.Join(o.Traceback, "\n")
		}
		return exportOut{Error: ansiCodes().ReplaceAllString(t, "")}
	case "notice":
		return exportOut{Notice: o.Text}
	case "display":
		return exportDisplay(o.Data)
	}
	return exportOut{Notice: fmt.Sprintf("(an output of kind %q, not exported)", trunc(o.Kind, 40))}
}

// exportDisplay picks the richest MIME type of a bundle, in the web notebook's
// order.
func exportDisplay(data map[string]any) exportOut {
	text := func(m string) (string, bool) {
		switch v := data[m].(type) {
		case string:
			return v, true
		case []any: // Jupyter allows a list of lines
			var b strings.Builder
			for _, l := range v {
				if s, ok := l.(string); ok {
					b.WriteString(s)
				}
			}
			return b.String(), true
		}
		return "", false
	}
	if v, ok := text("text/html"); ok {
		return exportOut{Frame: v}
	}
	if v, ok := text("image/svg+xml"); ok {
		return exportOut{Image: template.URL("data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString([]byte(v)))}
	}
	for _, m := range []string{"image/png", "image/jpeg", "image/gif"} {
		if v, ok := text(m); ok {
			v = strings.Join(strings.Fields(v), "")
			if base64Text().MatchString(v) {
				return exportOut{Image: template.URL("data:" + m + ";base64," + v)}
			}
			return exportOut{Notice: "(an image whose data is not base64, not exported)"}
		}
	}
	if v, ok := text("text/markdown"); ok {
		return exportOut{Markdown: exportMD(v)}
	}
	for m, v := range data {
		if m == "application/json" || strings.HasSuffix(m, "+json") {
			if s, ok := v.(string); ok {
				return exportOut{Text: s}
			}
			b, _ := json.MarshalIndent(v, "", "  ")
			return exportOut{Text: string(b)}
		}
	}
	if v, ok := text("text/plain"); ok {
		return exportOut{Text: ansiCodes().ReplaceAllString(v, "")}
	}
	return exportOut{Notice: "(an output of a type the export does not show)"}
}

var exportPage = sync.OnceValue(func() *template.Template { return template.Must(template.New("export").Parse(exportHTML)) })

const exportHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{.CSP}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kiln notebook {{.ID}}</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; max-width: 980px; margin: 24px auto; padding: 0 16px; color: #1c1917; }
.meta { color: #78716c; font-size: 13px; }
section.cell { margin: 16px 0; }
.head { color: #78716c; font-size: 12px; }
pre { margin: 4px 0; padding: 6px 8px; white-space: pre-wrap; word-break: break-word; font: 13px/1.4 ui-monospace, Menlo, Consolas, monospace; background: #fafaf9; border: 1px solid #e7e5e4; }
pre.src { background: #f5f5f4; }
pre.stderr { background: #fff7ed; border-left: 3px solid #ea580c; }
pre.error { background: #fef2f2; border-left: 3px solid #dc2626; }
.notice { font-style: italic; color: #78716c; }
img { max-width: 100%; }
iframe { width: 100%; height: 360px; border: 1px solid #e7e5e4; }
</style>
</head>
<body>
<h1>kiln notebook</h1>
<p class="meta">session {{.ID}} · exported {{.When}}</p>
{{range .Cells}}<section class="cell {{if .Markdown}}markdown{{else}}code{{end}}">
{{if .Markdown}}{{.HTML}}{{else}}<div class="head">{{.Head}}</div>
<pre class="src" data-language="{{.Language}}"><code>{{.Source}}</code></pre>
{{range .Outputs}}{{if .Stream}}<pre class="stdout">{{.Stream}}</pre>
{{else if .Stderr}}<pre class="stderr">{{.Stderr}}</pre>
{{else if .Text}}<pre class="result">{{.Text}}</pre>
{{else if .Image}}<img alt="image output" src="{{.Image}}">
{{else if .Frame}}<iframe sandbox title="HTML output (no scripts)" srcdoc="{{.Frame}}"></iframe>
{{else if .Markdown}}<div class="md-output">{{.Markdown}}</div>
{{else if .Error}}<pre class="error">{{.Error}}</pre>
{{else if .Notice}}<p class="notice">{{.Notice}}</p>
{{end}}{{end}}{{end}}</section>
{{end}}</body>
</html>
`
