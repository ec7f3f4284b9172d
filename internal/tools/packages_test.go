package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// run_code and execute_code pass packages on to the API; bad ones are
// tool errors before any request, and the server's refusal (network
// policy none) comes back as a tool error in its words.
func TestPackagesArgument(t *testing.T) {
	var runs []client.RunRequest
	var execs []client.ExecRequest
	mux := http.NewServeMux()
	refuse := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(403)
		fmt.Fprint(w, `{"status":403,"code":"forbidden","detail":"this session's network policy is \"none\", so pip cannot reach a package index"}`)
	}
	mux.HandleFunc("POST /v1/run", func(w http.ResponseWriter, r *http.Request) {
		var req client.RunRequest
		json.NewDecoder(r.Body).Decode(&req)
		runs = append(runs, req)
		json.NewEncoder(w).Encode(client.RunResult{Result: client.CellResult{Status: "ok", Stdout: "ok"}})
	})
	mux.HandleFunc("POST /v1/sessions/{id}/executions", func(w http.ResponseWriter, r *http.Request) {
		var req client.ExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		execs = append(execs, req)
		if r.PathValue("id") == "none" {
			refuse(w)
			return
		}
		json.NewEncoder(w).Encode(client.Execution{ID: "x1", Status: "ok", Result: &client.CellResult{Status: "ok", Stdout: "ok"}})
	})
	c, err := InProcess(mux, "k", "192.0.2.1:1234")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r := Call(ctx, c, "run_code", json.RawMessage(`{"code": "import requests", "packages": ["requests==2.31.0"]}`), nil); r.IsError {
		t.Fatalf("run_code with packages: %+v", r)
	}
	if r := Call(ctx, c, "execute_code", json.RawMessage(`{"session_id": "s1", "code": "import requests", "packages": ["requests"]}`), nil); r.IsError {
		t.Fatalf("execute_code with packages: %+v", r)
	}
	if len(runs) != 1 || !slices.Equal(runs[0].Packages, []string{"requests==2.31.0"}) || len(execs) != 1 || !slices.Equal(execs[0].Packages, []string{"requests"}) {
		t.Errorf("requests sent: runs %+v, execs %+v; want the packages in both", runs, execs)
	}
	r := Call(ctx, c, "execute_code", json.RawMessage(`{"session_id": "none", "code": "1", "packages": ["requests"]}`), nil)
	if !r.IsError || !strings.Contains(r.Text(), `network policy is "none"`) {
		t.Errorf("a refused install: %+v; want a tool error naming the policy", r)
	}
	before := len(execs)
	for _, bad := range []string{`"requests"`, `[""]`, `[1]`, `["` + strings.Repeat("a", 300) + `"]`} {
		r := Call(ctx, c, "execute_code", json.RawMessage(`{"session_id": "s1", "code": "1", "packages": `+bad+`}`), nil)
		if !r.IsError || !strings.Contains(r.Text(), "packages") {
			t.Errorf("packages %s: %+v; want a tool error naming packages", bad, r)
		}
	}
	if len(execs) != before {
		t.Errorf("bad packages reached the API: %+v", execs[before:])
	}
}

// run_code passes its network policy on with its packages, and its
// result says what was installed, with versions, before the output.
func TestRunCodeNetworkAndPackages(t *testing.T) {
	var got client.RunRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/run", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&got)
		json.NewEncoder(w).Encode(client.RunResult{Result: client.CellResult{Status: "ok", Stdout: "tiny!"},
			Packages: &client.PackageResult{Manager: "pip", Packages: []client.InstalledPackage{{Name: "kiln-tiny", Version: "1.0", Requested: true}}}})
	})
	c, err := InProcess(mux, "k", "192.0.2.1:1234")
	if err != nil {
		t.Fatal(err)
	}
	r := Call(context.Background(), c, "run_code", json.RawMessage(`{"code": "import kilntiny", "packages": ["kiln-tiny"], "network": {"mode": "allowlist", "allow": ["example.com"]}}`), nil)
	if r.IsError || !strings.Contains(r.Text(), "pip installed first: kiln-tiny 1.0") || !strings.Contains(r.Text(), "tiny!") {
		t.Errorf("run_code with packages: %+v; want the install's summary and the output", r)
	}
	if got.Network == nil || got.Network.Mode != "allowlist" || !slices.Equal(got.Network.Allow, []string{"example.com"}) || !slices.Equal(got.Packages, []string{"kiln-tiny"}) {
		t.Errorf("request sent: %+v; want the network policy and the packages", got)
	}
}
