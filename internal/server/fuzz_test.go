package server

import (
	"net/http/httptest"
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
