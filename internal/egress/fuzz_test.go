package egress

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// FuzzParseEntry: no input crashes the allowlist parser, and an accepted
// entry prints as an entry that parses back to itself.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com:8443", "EXAMPLE.com.", "a_b.c", "[::1]:80", "*.com", "x:0", "é.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseEntry(s)
		if err != nil {
			return
		}
		again, err := parseEntry(e.String())
		if err != nil || again != e {
			t.Errorf("parseEntry(%q) = %v, which parses back as %v, %v", s, e, again, err)
		}
	})
}

// FuzzRewritePyPI: whatever page an index serves, every link in the
// rewritten page is a mirror link, so pip follows nothing past the proxy.
func FuzzRewritePyPI(f *testing.F) {
	f.Add([]byte(`<a href="x.whl#sha256=00">x</a>`))
	f.Add([]byte(`<base href="http://elsewhere/"><a href="//evil/x">x</a><A HREF='y'>`))
	f.Add([]byte(`<a href="javascript:alert(1)" href="http://a/b">`))
	sign := func(parts ...string) string { return "sig" }
	f.Fuzz(func(t *testing.T, page []byte) {
		out, err := rewritePyPI(page, "http://index.example/simple/p/", "p", sign)
		if err != nil {
			return
		}
		z := html.NewTokenizer(bytes.NewReader(out))
		for {
			tt := z.Next()
			if tt == html.ErrorToken {
				return
			}
			tok := z.Token()
			if tok.Data == "base" && (tt == html.StartTagToken || tt == html.SelfClosingTagToken) {
				t.Fatalf("a <base> survived: %q", out)
			}
			for _, a := range tok.Attr {
				if a.Key == "href" && tok.Data == "a" && !strings.HasPrefix(a.Val, "/pypi/files/p/") {
					t.Fatalf("link %q is not a mirror link in %q (from %q)", a.Val, out, page)
				}
			}
		}
	})
}
