package server_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// TestCompleteRoute: POST /v1/sessions/{id}/complete answers the Python
// kernel's completions of a name a cell defined, with the span they
// replace; a cursor past the code is a 400 that says the allowed range.
func TestCompleteRoute(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Exec(ctx, s.ID, client.ExecRequest{Code: "alpha_value = 1"}); err != nil {
		t.Fatal(err)
	}
	code := "é = 1\nalpha_v"
	got, err := e.admin.Complete(ctx, s.ID, client.CompleteRequest{Code: code, Cursor: len([]rune(code))})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Matches, "alpha_value") || got.CursorStart != 6 || got.CursorEnd != 13 {
		t.Errorf("completion of alpha_v: %+v, want alpha_value replacing code points 6 to 13", got)
	}
	_, err = e.admin.Complete(ctx, s.ID, client.CompleteRequest{Code: "x", Cursor: 5})
	if p := wantProblem(t, "a cursor past the code", err, 400, "invalid"); !strings.Contains(p.Detail, "0 to 1") {
		t.Errorf("the problem says %q, want the allowed range", p.Detail)
	}
}

// TestFormatRoute: POST /v1/sessions/{id}/format runs black on Python
// code and gofmt on Go code in the session's sandbox; code the formatter
// refuses is a 400 with its message, a language without a formatter a
// 400 naming those with one, and a viewer may not format.
func TestFormatRoute(t *testing.T) {
	for _, bin := range []string{"/usr/bin/black", "/usr/local/go/bin/gofmt"} {
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("needs %s (scripts/deps installs Debian's black and Go)", bin)
		}
	}
	e := newEnv(t, options{})
	ctx := ctxT(t)
	s, err := e.admin.CreateSession(ctx, client.SessionRequest{Languages: []string{"python", "go"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ lang, code, want string }{
		{"", "x = {  'a':1 }\n", "x = {\"a\": 1}\n"},
		{"go", "package main\nfunc main(){println( 1 )}\n", "package main\n\nfunc main() { println(1) }\n"},
	} {
		got, err := e.admin.Format(ctx, s.ID, client.FormatRequest{Code: c.code, Language: c.lang})
		if err != nil {
			t.Fatalf("format %q: %v", c.code, err)
		}
		if got != c.want {
			t.Errorf("format %s %q:\n got %q\nwant %q", c.lang, c.code, got, c.want)
		}
	}
	_, err = e.admin.Format(ctx, s.ID, client.FormatRequest{Code: "def f(:\n"})
	if p := wantProblem(t, "format a syntax error", err, 400, "invalid"); !strings.Contains(p.Detail, "could not format") || !strings.Contains(p.Detail, "Cannot parse") {
		t.Errorf("the problem says %q, want black's message", p.Detail)
	}
	_, err = e.admin.Format(ctx, s.ID, client.FormatRequest{Code: "x", Language: "fortran"})
	if p := wantProblem(t, "format fortran", err, 400, "invalid"); !strings.Contains(p.Detail, "go, python") {
		t.Errorf("the problem says %q, want the languages kiln formats", p.Detail)
	}

	u, err := e.admin.CreateUser(ctx, client.UserRequest{Name: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.admin.CreateKey(ctx, u.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.ShareSession(ctx, s.ID, u.ID, "viewer"); err != nil {
		t.Fatal(err)
	}
	viewer, _ := client.New(e.url, k.Secret)
	_, err = viewer.Format(ctx, s.ID, client.FormatRequest{Code: "x=1"})
	wantProblem(t, "a viewer formats", err, 403, "forbidden")
}
