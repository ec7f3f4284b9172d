package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-dev/kiln/client"
)

// TestSessionInstall: kiln session install sends the packages and the
// manager, shows pip's output on stderr as it streams and the installed
// packages on stdout; a refusal is the server's message and exit 125.
func TestSessionInstall(t *testing.T) {
	var got client.PackageRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/sessions/s1/packages" || r.Header.Get("Accept") != "text/event-stream" {
			problem(w, 404, "not_found", "no route "+r.Method+" "+r.URL.Path)
			return
		}
		body, _ := io.ReadAll(r.Body)
		got = client.PackageRequest{}
		json.Unmarshal(body, &got)
		if got.Manager == "npm" {
			problem(w, 403, "forbidden", `this session's network policy is "none", so npm cannot reach a package index`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		res := client.PackageResult{Manager: "pip", WallMS: 12, Packages: []client.InstalledPackage{
			{Name: "kiln-tiny", Version: "1.0", Requested: true}, {Name: "kiln-dep", Version: "2.5"}, {Name: "numpy", Version: "1.24.2", Requested: true, Present: true}}}
		for _, ev := range []client.Event{{Type: "started"}, {Type: "stdout", Data: "Collecting kiln-tiny\n"}, {Type: "done", Packages: &res}} {
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, b)
		}
	}))
	t.Cleanup(srv.Close)
	isolate(t)
	t.Setenv("KILN_SERVER", srv.URL)
	t.Setenv("KILN_KEY", fakeKey)

	r := runCLI(t, "", "session", "install", "s1", "kiln-tiny==1.0", "numpy")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if d := cmp.Diff(client.PackageRequest{Manager: "pip", Packages: []string{"kiln-tiny==1.0", "numpy"}}, got); d != "" {
		t.Errorf("request (-want +got):\n%s", d)
	}
	want := "PACKAGE    VERSION  \nkiln-tiny  1.0      installed\nkiln-dep   2.5      dependency\nnumpy      1.24.2   already there\n"
	if r.stdout != want || !strings.Contains(r.stderr, "Collecting kiln-tiny") {
		t.Errorf("stdout %q, stderr %q; want %q and pip's output on stderr", r.stdout, r.stderr, want)
	}
	r = runCLI(t, "", "session", "install", "--manager", "npm", "-r", "package.json", "s1")
	if r.code != 125 || !strings.Contains(r.stderr, `network policy is "none"`) || got.Requirements != "package.json" {
		t.Errorf("a refused install: exit %d, %q, sent %+v; want 125 and the server's reason", r.code, r.stderr, got)
	}
	if r := runCLI(t, "", "session", "install", "s1"); r.code != 2 {
		t.Errorf("no packages and no -r: exit %d, %q; want the usage (2)", r.code, r.stderr)
	}
}

// TestLanguagesPackages: kiln languages --packages lists pip's packages
// as this host's sessions see them.
func TestLanguagesPackages(t *testing.T) {
	r := runCLI(t, "", "languages", "--packages")
	if r.code != 0 {
		t.Skipf("this host cannot list its packages: %s", r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "MANAGER") || !strings.Contains(r.stdout, "\npip ") {
		t.Errorf("kiln languages --packages: %q; want a table with pip's packages", r.stdout)
	}
}
