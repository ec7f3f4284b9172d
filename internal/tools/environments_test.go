package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// create_session and run_code pass an environment on, and create_session
// says it; the server's refusal of an unknown one is a tool error in its
// words.
func TestEnvironmentTools(t *testing.T) {
	var sessions []client.SessionRequest
	var runs []client.RunRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		var req client.SessionRequest
		json.NewDecoder(r.Body).Decode(&req)
		sessions = append(sessions, req)
		if req.Environment == "nope" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(400)
			fmt.Fprint(w, `{"status":400,"code":"invalid","detail":"environment \"nope\" is not defined here; the environments are: data-science"}`)
			return
		}
		json.NewEncoder(w).Encode(client.Session{ID: "s1", Languages: []string{"python"}, IdleTTLSeconds: 3600, Environment: req.Environment})
	})
	mux.HandleFunc("POST /v1/run", func(w http.ResponseWriter, r *http.Request) {
		var req client.RunRequest
		json.NewDecoder(r.Body).Decode(&req)
		runs = append(runs, req)
		json.NewEncoder(w).Encode(client.RunResult{Result: client.CellResult{Status: "ok", Stdout: "tiny!\n"}})
	})
	c, err := InProcess(mux, "k", "192.0.2.1:1234")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := Call(ctx, c, "create_session", json.RawMessage(`{"environment": "data-science"}`), nil)
	if r.IsError || len(sessions) != 1 || sessions[0].Environment != "data-science" || !strings.Contains(r.Text(), "environment: data-science") {
		t.Errorf("create_session with an environment: %q, sent %+v", r.Text(), sessions)
	}
	if r := Call(ctx, c, "create_session", json.RawMessage(`{}`), nil); r.IsError || strings.Contains(r.Text(), "environment") {
		t.Errorf("create_session without one: %q; want no environment said", r.Text())
	}
	if r := Call(ctx, c, "create_session", json.RawMessage(`{"environment": "nope"}`), nil); !r.IsError || !strings.Contains(r.Text(), "the environments are: data-science") {
		t.Errorf("an unknown environment: %+v; want a tool error naming those there are", r)
	}
	r = Call(ctx, c, "run_code", json.RawMessage(`{"code": "import kilntiny", "environment": "data-science"}`), nil)
	if r.IsError || len(runs) != 1 || runs[0].Environment != "data-science" {
		t.Errorf("run_code with an environment: %q, sent %+v", r.Text(), runs)
	}
}
