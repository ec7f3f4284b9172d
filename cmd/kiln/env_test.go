package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// TestServeEnvironmentsFromConfig: the --config file's "environments" is
// the array itself; a bad one is refused naming what is wrong.
func TestServeEnvironmentsFromConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kiln.json")
	os.WriteFile(p, []byte(`{"pool": 1, "environments": [{"name": "data-science", "pip": ["pandas==2.2.2", "requests"], "npm": ["lodash@4.17.21"]}]}`), 0o600)
	f, err := parseServe([]string{"--data", dir, "--config", p}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := []service.EnvironmentDef{{Name: "data-science", Pip: []string{"pandas==2.2.2", "requests"}, NPM: []string{"lodash@4.17.21"}}}
	if len(f.svc.Environments) != 1 || f.svc.Environments[0].Name != want[0].Name || len(f.svc.Environments[0].Pip) != 2 || f.svc.Environments[0].NPM[0] != "lodash@4.17.21" {
		t.Errorf("environments %+v, want %+v", f.svc.Environments, want)
	}
	for _, c := range []struct{ file, want string }{
		{`{"environments": {"name": "x"}}`, "must be a JSON array"},
		{`{"environments": [{"name": "x", "pip": ["a"], "apt": ["curl"]}]}`, `unknown field "apt"`},
		{`{"environments": [{"name": "X Y", "pip": ["a"]}]}`, "lowercase letters"},
		{`{"environments": [{"name": "x", "pip": ["--index-url=http://evil.invalid/"]}]}`, "looks like an option"},
	} {
		os.WriteFile(p, []byte(c.file), 0o600)
		if _, err := parseServe([]string{"--data", dir, "--config", p}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.file, err, c.want)
		}
	}
}

// TestEnvCommands: kiln env ls shows each environment's packages (as
// pinned before a build, with versions after); kiln env build asks the
// server to build and says when there was nothing to do; kiln session
// create --env sends the name.
func TestEnvCommands(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	built := client.Environment{Name: "data-science", Pip: []string{"kiln-tiny==1.0"}, NPM: []string{}, Built: true, Hash: "abc", BuiltAt: &at,
		Python: []client.InstalledPackage{{Name: "kiln-tiny", Version: "1.0", Requested: true}, {Name: "kiln-dep", Version: "2.5"}}}
	var sent client.SessionRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/environments":
			json.NewEncoder(w).Encode([]client.Environment{built, {Name: "web", Pip: []string{}, NPM: []string{"left-pad@1.3.0"}}})
		case "POST /v1/environments/data-science/build":
			json.NewEncoder(w).Encode(client.EnvironmentBuild{Environment: built, Built: false})
		case "POST /v1/environments/nope/build":
			problem(w, 400, "invalid", `environment "nope" is not defined here; the environments are: data-science, web`)
		case "POST /v1/sessions":
			json.NewDecoder(r.Body).Decode(&sent)
			w.WriteHeader(201)
			json.NewEncoder(w).Encode(client.Session{ID: "s1", Environment: sent.Environment})
		default:
			problem(w, 404, "not_found", "no route "+r.Method+" "+r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	isolate(t)
	t.Setenv("KILN_SERVER", srv.URL)
	t.Setenv("KILN_KEY", fakeKey)

	r := runCLI(t, "", "env", "ls")
	want := "data-science: built 2026-01-02 03:04 UTC\n  MANAGER  PACKAGE    VERSION  \n  pip      kiln-tiny  1.0      pinned\n  pip      kiln-dep   2.5      dependency\n\nweb: not built (kiln env build web)\n  npm: left-pad@1.3.0\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("kiln env ls: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
	}
	r = runCLI(t, "", "env", "build", "data-science")
	if r.code != 0 || !strings.Contains(r.stderr, "built already") || !strings.Contains(r.stdout, "kiln-dep   2.5") {
		t.Errorf("kiln env build: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "", "env", "build", "nope")
	if r.code != 125 || !strings.Contains(r.stderr, "data-science, web") {
		t.Errorf("kiln env build nope: exit %d, %q; want 125 and the server's message", r.code, r.stderr)
	}
	if r := runCLI(t, "", "env", "build"); r.code != 2 {
		t.Errorf("kiln env build without a name: exit %d; want the usage (2)", r.code)
	}
	r = runCLI(t, "", "session", "create", "--env", "data-science")
	if r.code != 0 || sent.Environment != "data-science" || r.stdout != "s1\n" {
		t.Errorf("session create --env: exit %d, %q, sent %+v", r.code, r.stderr, sent)
	}
}
