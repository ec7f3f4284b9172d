package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// TestEnvironmentsAPI: GET /v1/environments lists the administrator's
// environments with their packages, unbuilt; a session asking for an
// unknown one is a 400 and for an unbuilt one a 409, each naming what
// there is; only an admin may build. (The build itself and a session
// using it need the native backend: TestEnvironmentBuildAndUse in
// internal/service.)
func TestEnvironmentsAPI(t *testing.T) {
	e := newEnv(t, options{svc: service.Config{Environments: []service.EnvironmentDef{
		{Name: "data-science", Pip: []string{"pandas==2.2.2"}}, {Name: "web", NPM: []string{"left-pad@1.3.0"}}}}})
	ctx := ctxT(t)
	alice := e.user("alice")
	list, err := alice.Environments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "data-science" || list[0].Built || len(list[0].Pip) != 1 || list[0].Pip[0] != "pandas==2.2.2" ||
		list[1].Name != "web" || len(list[1].NPM) != 1 {
		t.Errorf("environments %+v; want data-science (pandas) and web (left-pad), unbuilt", list)
	}
	_, err = alice.CreateSession(ctx, client.SessionRequest{Environment: "nope"})
	if p := wantProblem(t, "an unknown environment", err, http.StatusBadRequest, "invalid"); !strings.Contains(p.Detail, "data-science, web") {
		t.Errorf("detail %q; want the defined environments named", p.Detail)
	}
	_, err = alice.CreateSession(ctx, client.SessionRequest{Environment: "web"})
	if p := wantProblem(t, "an unbuilt environment", err, http.StatusConflict, "conflict"); !strings.Contains(p.Detail, "kiln env build web") {
		t.Errorf("detail %q; want how to build it", p.Detail)
	}
	_, err = alice.BuildEnvironment(ctx, "web")
	wantProblem(t, "a build by a non-admin", err, http.StatusForbidden, "forbidden")
	_, err = e.admin.BuildEnvironment(ctx, "nope")
	wantProblem(t, "a build of an unknown environment", err, http.StatusBadRequest, "invalid")
	// A session without one is as before.
	if s, err := alice.CreateSession(ctx, client.SessionRequest{}); err != nil || s.Environment != "" {
		t.Errorf("a session without an environment: %+v, %v", s, err)
	}
}
