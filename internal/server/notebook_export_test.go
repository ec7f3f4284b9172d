package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// TestExportNotebookHTML: GET /v1/sessions/{id}/export?format=html turns
// the saved notebook into one HTML attachment: markdown rendered without
// its raw HTML or javascript: links, code and outputs escaped, a PNG
// inline, HTML output only in a frame without scripts, and a policy that
// allows no script. Without a notebook it is a 404 that says why; another
// format is a 400 naming the allowed one.
func TestExportNotebookHTML(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(query string) (*http.Response, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/sessions/"+s.ID+"/export"+query, nil)
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get("?format=html"); resp.StatusCode != 404 || !strings.Contains(body, "no saved notebook") {
		t.Errorf("export without a notebook: %d %s, want 404 saying there is no saved notebook", resp.StatusCode, body)
	}
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	nb := `{"format":"kiln-notebook","version":1,"cells":[
	 {"id":"a","type":"markdown","language":"markdown","source":"# Sales <script>alert(1)</script>\n\n[click](javascript:alert(2))","outputs":[]},
	 {"id":"b","type":"code","language":"python","source":"print('<b>x</b>')","status":"ok","seq":3,"outputs":[
	   {"kind":"stream","name":"stdout","text":"<b>x</b>\n"},
	   {"kind":"stream","name":"stderr","text":"\u001b[31mwarn\u001b[0m\n"},
	   {"kind":"display","data":{"image/png":"` + png + `","text/plain":"<Figure>"}},
	   {"kind":"display","data":{"text/html":"<table><tr><td>42</td></tr></table><script>parent.document.title='x'</script>"}},
	   {"kind":"error","name":"ValueError","message":"bad <input>","traceback":["line 1"]}]}]}`
	if _, err := e.admin.Upload(ctx, s.ID, ".kiln-notebook.json", strings.NewReader(nb), true); err != nil {
		t.Fatal(err)
	}
	resp, body := get("?format=html")
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d %s", resp.StatusCode, body)
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment") || !strings.Contains(cd, "kiln-"+s.ID+".html") {
		t.Errorf("Content-Disposition %q, want an attachment named kiln-ID.html", cd)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q, want sandbox and default-src 'none'", csp)
	}
	for _, want := range []string{
		"<h1>Sales", // markdown rendered
		`<pre class="stdout">&lt;b&gt;x&lt;/b&gt;`,                               // output escaped
		`<pre class="stderr">warn`,                                               // colour codes gone
		`src="data:image/png;base64,` + png[:20],                                 // the image inline
		`<iframe sandbox title="HTML output (no scripts)" srcdoc="&lt;table&gt;`, // HTML only in a frame
		"ValueError: bad &lt;input&gt;",
		`<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;`,
		"[3] python · ok",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the export lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "javascript:"} {
		if strings.Contains(body, bad) {
			t.Errorf("the export has %q outside an escaped frame:\n%s", bad, body)
		}
	}
	if resp, body := get("?format=pdf"); resp.StatusCode != 400 || !strings.Contains(body, "allowed: html") {
		t.Errorf("format=pdf: %d %s, want 400 naming html", resp.StatusCode, body)
	}
	if _, err := e.admin.Upload(ctx, s.ID, ".kiln-notebook.json", strings.NewReader(`{"cells": 5}`), true); err != nil {
		t.Fatal(err)
	}
	if resp, body := get("?format=html"); resp.StatusCode != 400 || !strings.Contains(body, "not a kiln notebook") {
		t.Errorf("a broken notebook file: %d %s, want 400 saying it is not a kiln notebook", resp.StatusCode, body)
	}
}
