package server

import (
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/kiln-dev/kiln/web"
)

// appCSP is the notebook's Content-Security-Policy: scripts only from the
// server's own files (none inline), connections only to this origin, and
// frames only from this origin (/ui/frame.html, where HTML output runs).
// Styles allow 'unsafe-inline' because the editor (Monaco) sets styles
// from script; no script can run from a style.
const appCSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
	"font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; frame-src 'self'; object-src 'none'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// frameCSP is the policy of the frame that shows a cell's HTML output. The
// sandbox directive gives the frame an opaque origin even if it is opened
// on its own: its scripts cannot read the notebook's cookies, call the API
// as the user (connect-src 'none', and the SameSite cookie is not sent
// from an opaque origin) or navigate the top window.
const frameCSP = "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
	"img-src data: blob:; font-src data:; media-src data: blob:; connect-src 'none'; form-action 'none'; frame-ancestors 'self'"

// frameHTML receives the HTML to show from its parent window by
// postMessage, writes it into itself and tells the parent its height.
const frameHTML = `<!doctype html><html><head><meta charset="utf-8"><style>body{margin:0;font-family:sans-serif}</style></head><body><script>
addEventListener("message", function (e) {
  if (e.source !== parent || !e.data || typeof e.data.html !== "string") return;
  document.open(); document.write(e.data.html); document.close();
  var post = function () { parent.postMessage({kilnFrameHeight: document.documentElement.scrollHeight}, "*"); };
  post(); setTimeout(post, 100); setTimeout(post, 1000);
}, {once: true});
parent.postMessage({kilnFrameReady: true}, "*");
</script></body></html>`

// notBuiltPage is / when the binary was built without the UI.
const notBuiltPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>kiln</title></head><body>
<h1>kiln</h1>
<p>The web notebook (the UI) was not built into this binary: run <code>scripts/install</code>, or
<code>npm ci &amp;&amp; npm run build</code> in <code>web/</code>, then build kiln again.</p>
<p>The HTTP API works without it: <a href="/v1/openapi.json">/v1/openapi.json</a> lists the routes
(send an API key as <code>Authorization: Bearer KEY</code>). The admin API key is printed once, on the server's first start.</p>
</body></html>
`

// serveUI serves the notebook's index.html at / and its hashed assets
// under /assets/.
func (s *Server) serveUI(w http.ResponseWriter, r *http.Request) {
	noteRoute(w, r)
	h := w.Header()
	h.Set("Content-Security-Policy", appCSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	ui, ok := web.UI()
	if !ok {
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			w.Write([]byte(notBuiltPage))
		}
		return
	}
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if name == "" {
		name = "index.html"
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Cache-Control", "public, max-age=31536000, immutable") // Vite names assets by their content's hash
	}
	if st, err := fs.Stat(ui, name); err != nil || st.IsDir() {
		http.NotFound(w, r)
		return
	}
	http.ServeFileFS(w, r, ui, name)
}

// serveFrame serves the sandboxed frame for HTML output.
func serveFrame(w http.ResponseWriter, r *http.Request) {
	noteRoute(w, r)
	h := w.Header()
	h.Set("Content-Security-Policy", frameCSP)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write([]byte(frameHTML))
	}
}
