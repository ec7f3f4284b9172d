package server_test

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

// A session asking for an extended resource (a GPU) from a server whose
// administrator allows none is a 400 that says how they are allowed,
// before any sandbox is made.
func TestSessionResourcesNotAllowed(t *testing.T) {
	e := newEnv(t, options{})
	c := e.user("gpu-less")
	_, err := c.CreateSession(ctxT(t), client.SessionRequest{Resources: map[string]int64{"nvidia.com/gpu": 1}})
	p := wantProblem(t, "a session asking for nvidia.com/gpu", err, 400, "invalid")
	if !strings.Contains(p.Detail, "allows no extended resources") || !strings.Contains(p.Detail, "--k8s-extended-resource") {
		t.Errorf("the 400 says %q; want that none are allowed and how an administrator allows them", p.Detail)
	}
	list, err := c.ListSessions(ctxT(t), client.ListOptions{})
	if err != nil || len(list.Sessions) != 0 {
		t.Errorf("sessions after the refused create: %v, %v; want none", list, err)
	}
}
