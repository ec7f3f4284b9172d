package server

import (
	"net/http/httptest"
	"path"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// FuzzDecode: any body gives a decoded request or a clear client error,
// never a panic or an internal error.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"languages":["python"],"limits":{"memory_bytes":1}}`, `{"metadata":{"a":"b"}} x`,
		`[`, `{"idle_ttl_seconds":1e99}`, `{"languages":null}`, "\x00", `{"a":1}`, `"str"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var req client.SessionRequest
		err := decode(httptest.NewRecorder(), r, 1<<12, &req)
		if err == nil {
			return
		}
		if k := kiln.KindOf(err); k != kiln.Invalid && k != kiln.TooLarge {
			t.Fatalf("body %q: error kind %s (%v)", body, k, err)
		}
		if p := problemFor(err); p.Status != 400 && p.Status != 413 {
			t.Fatalf("body %q: status %d", body, p.Status)
		}
	})
}

// FuzzWSPath: an accepted path is clean, relative and inside the
// workspace; nothing else is accepted.
func FuzzWSPath(f *testing.F) {
	for _, s := range []string{"a/b.txt", "../x", "/etc/passwd", "a/../../b", "a\x00b", `..\x`, "./a/./b/", "", ".", "a//b", strings.Repeat("a/", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := wsPath(p, true)
		if err != nil {
			if kiln.KindOf(err) != kiln.Invalid && kiln.KindOf(err) != kiln.TooLarge {
				t.Fatalf("%q: error kind %s", p, kiln.KindOf(err))
			}
			return
		}
		if got == "" {
			return // the workspace root
		}
		if path.IsAbs(got) || got != path.Clean(got) || got == ".." || strings.HasPrefix(got, "../") ||
			strings.ContainsAny(got, "\x00\\") {
			t.Fatalf("%q accepted as %q", p, got)
		}
	})
}
