package tools

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// URI is a session workspace file's resource URI, as the MCP resource
// template FileTemplate names it.
func URI(sessionID, p string) string {
	return "kiln://sessions/" + url.PathEscape(sessionID) + "/files/" + escapePath(p)
}

// FileTemplate is the URI template of workspace files.
const FileTemplate = "kiln://sessions/{session_id}/files/{+path}"

func escapePath(p string) string {
	parts := strings.Split(strings.TrimLeft(p, "/"), "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// ParseURI reads a URI made by URI back into a session and a path.
func ParseURI(uri string) (sessionID, p string, err error) {
	rest, ok := strings.CutPrefix(uri, "kiln://sessions/")
	if !ok {
		return "", "", fmt.Errorf("resource %q: kiln's resources are %s", truncate(uri, 200), FileTemplate)
	}
	id, rawPath, ok := strings.Cut(rest, "/files/")
	if !ok || id == "" || rawPath == "" {
		return "", "", fmt.Errorf("resource %q: want %s", truncate(uri, 200), FileTemplate)
	}
	if sessionID, err = url.PathUnescape(id); err == nil {
		p, err = url.PathUnescape(rawPath)
	}
	if err != nil {
		return "", "", fmt.Errorf("resource %q: bad escaping: %v", truncate(uri, 200), err)
	}
	return sessionID, p, nil
}

// fromCell turns a cell's result into parts a model reads in order
// (IsError when a limit stopped the code):
// a status line when it did not end well, stdout, stderr, displays
// (images as images, tables and HTML as their text form), the error.
func fromCell(res *client.CellResult) *Result {
	r := &Result{}
	text := func(s string) {
		if s != "" {
			r.Content = append(r.Content, Part{Type: PartText, Text: truncate(s, maxTextPart)})
		}
	}
	// A limit that stopped the code is kiln's refusal to go on, which an
	// agent should see as a failed call; an exception is the code's own
	// result.
	switch res.Status {
	case kiln.StatusTimeout, kiln.StatusMemory, kiln.StatusOutput:
		r.IsError = true
	}
	if res.Status != "ok" {
		line := "status: " + string(res.Status)
		if res.ExitCode != nil {
			line += fmt.Sprintf(" (exit code %d)", *res.ExitCode)
		}
		text(line)
	}
	if res.Notice != "" {
		text("notice: " + res.Notice)
	}
	text(res.Stdout)
	if res.Stderr != "" {
		text("stderr:\n" + res.Stderr)
	}
	for _, o := range res.Outputs {
		r.Content = append(r.Content, displayPart(o)...)
	}
	if e := res.Error; e != nil {
		msg := e.Name
		if e.Message != "" {
			msg += ": " + e.Message
		}
		if len(e.Traceback) > 0 {
			msg = strings.Join(e.Traceback, "\n")
		}
		for _, d := range e.Diagnostics {
			msg += "\n" + diagnostic(d)
		}
		text("error:\n" + msg)
	}
	text(egressText(res.Egress))
	if len(r.Content) == 0 {
		text("(no output)")
	}
	return r
}

// maxEgressLines bounds the network lines of one result; the rest are
// counted, and the audit log has them all.
const maxEgressLines = 50

// egressText says a cell's network attempts, one line each: where to,
// allowed or denied and why, bytes each way, and whether the shared
// cache served it. Host and reason come from the proxy, but the host is
// what the code asked for, so it is cut and quoted as untrusted text.
func egressText(rs []client.EgressRecord) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("network:\n")
	for i, e := range rs {
		if i == maxEgressLines {
			fmt.Fprintf(&b, "… %d more attempts (the audit log has them all)\n", len(rs)-i)
			break
		}
		b.WriteString(egressLine(e) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func egressLine(e client.EgressRecord) string {
	if e.Kind == "dropped" {
		return "… " + truncate(e.Reason, 200)
	}
	where := fmt.Sprintf("%s:%d", hostText(e.Host), e.Port)
	if !e.Allowed {
		return fmt.Sprintf("%s denied: %s", where, cmpOr(truncate(e.Reason, 300), "refused by the network policy"))
	}
	s := fmt.Sprintf("%s allowed (%s, %d B up, %d B down", where, e.Kind, e.BytesUp, e.BytesDown)
	if e.Package != "" {
		s += ", package " + truncate(e.Package, 200)
	}
	if e.Cached {
		s += ", from cache"
	}
	return s + ")"
}

// hostText is a host as it is when it is a plain name or address, else
// quoted: the code chose it, and a line break in it must not make up
// lines of the result.
func hostText(h string) string {
	h = truncate(h, 255)
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_:[]*", r)) {
			return strconv.Quote(h)
		}
	}
	return h
}

func diagnostic(d client.Diagnostic) string {
	return fmt.Sprintf("%s:%d:%d: %s: %s", d.File, d.Line, d.Column, d.Severity, d.Message)
}

// displayPart picks the form of a MIME bundle a model reads best:
// an image as an image, else markdown, else the plain text (a pandas
// table's text/plain is an aligned table), else LaTeX, JSON, then HTML as
// it is.
func displayPart(o client.Output) []Part {
	str := func(mime string) (string, bool) {
		raw, ok := o.Data[mime]
		if !ok {
			return "", false
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, true
		}
		return string(raw), true // application/json is an object
	}
	for _, mime := range []string{"image/png", "image/jpeg", "image/gif", "image/webp"} {
		if s, ok := str(mime); ok {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
			if err == nil {
				return []Part{{Type: PartImage, MIMEType: mime, Data: b}}
			}
		}
	}
	for _, mime := range []string{"text/markdown", "text/plain", "text/latex", "application/json", "text/html", "image/svg+xml"} {
		if s, ok := str(mime); ok {
			return []Part{{Type: PartText, Text: truncate(s, maxTextPart)}}
		}
	}
	return nil
}

// artifactLinks lists a cell's new and changed files as links to the
// workspace resources.
func artifactLinks(sessionID string, as []client.Artifact) []Part {
	var ps []Part
	for _, a := range as {
		if a.Change == "deleted" {
			continue
		}
		ps = append(ps, Part{Type: PartResourceLink, URI: URI(sessionID, a.Path), Name: a.Path,
			MIMEType: mimeOf(a.Path), Size: a.Size})
	}
	return ps
}

// runFiles shows a one-shot run's files: its sandbox is gone, so they
// come inline (images as images, short text as text), not as links.
func runFiles(fs []client.File) []Part {
	var ps []Part
	for _, f := range fs {
		ps = append(ps, fileContent(f.Path, mimeOf(f.Path), f.Content, false).Content...)
	}
	return ps
}

// fileContent shows one file's bytes.
func fileContent(p, ctype string, b []byte, cut bool) *Result {
	mime := strings.TrimSpace(strings.Split(ctype, ";")[0])
	if m := mimeOf(p); strings.HasPrefix(m, "image/") {
		mime = m
	}
	note := ""
	if cut {
		note = fmt.Sprintf("\n[cut at %d bytes; pass a larger max_bytes to read more]", len(b))
	}
	switch {
	case (mime == "image/png" || mime == "image/jpeg" || mime == "image/gif" || mime == "image/webp") && !cut:
		return &Result{Content: []Part{{Type: PartImage, MIMEType: mime, Data: b}}}
	case utf8.Valid(b) || (cut && utf8.Valid(b[:max(0, len(b)-3)])):
		return textResult(fmt.Sprintf("%s:\n%s%s", p, b, note))
	}
	return textResult(fmt.Sprintf("%s: binary file (%s), %d bytes%s; use code to inspect it", p, cmpOr(mime, "application/octet-stream"), len(b), note))
}

func mimeOf(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	case ".svg":
		return "image/svg+xml"
	case ".csv":
		return "text/csv"
	case ".json":
		return "application/json"
	case ".html", ".htm":
		return "text/html"
	case ".txt", ".md", ".py", ".js", ".ts", ".go", ".c", ".h", ".cpp", ".rs", ".java", ".sh", ".sql":
		return "text/plain"
	}
	return ""
}
