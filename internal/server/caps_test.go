package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// TestCapsAndBudgets: a non-admin asking above the operator's maximum
// gets a 403 naming the limit and the maximum, an admin does not; the
// usage route reports the budgets; past the day's CPU budget the next
// cell is a 429 quota_exceeded.
func TestCapsAndBudgets(t *testing.T) {
	e := newEnv(t, options{svc: service.Config{MaxLimits: kiln.Limits{MemoryBytes: kiln.GiB}, CPUSecondsPerDay: 1}})
	ctx := ctxT(t)
	bob := e.user("bob")
	_, err := bob.CreateSession(ctx, client.SessionRequest{Limits: client.Limits{MemoryBytes: 2 * kiln.GiB}})
	p := wantProblem(t, "bob asks for 2 GiB", err, http.StatusForbidden, "forbidden")
	if !strings.Contains(p.Detail, "memory_bytes") || !strings.Contains(p.Detail, "1 GiB") {
		t.Errorf("the problem does not name the limit and the maximum: %q", p.Detail)
	}
	as, err := e.admin.CreateSession(ctx, client.SessionRequest{Limits: client.Limits{MemoryBytes: 2 * kiln.GiB}})
	if err != nil {
		t.Fatalf("an admin above the maximum: %v", err)
	}
	if as.Limits.MemoryBytes != 2*kiln.GiB {
		t.Errorf("admin's session memory = %d", as.Limits.MemoryBytes)
	}

	s, err := bob.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := bob.Exec(ctx, s.ID, client.ExecRequest{Code: "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2: pass"})
	if err != nil || x.Status != "ok" {
		t.Fatalf("the CPU-burning cell: %v %+v", err, x)
	}
	u, err := bob.Usage(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	if u.Sessions != (client.Quota{Used: 1, Limit: 20}) || u.CPUSecondsToday.Limit != 1 || u.CPUSecondsToday.Used < 1 ||
		u.MaxLimits.MemoryBytes != kiln.GiB || u.Renews.IsZero() {
		t.Errorf("bob's usage: %+v", u)
	}
	_, err = bob.Exec(ctx, s.ID, client.ExecRequest{Code: "print(1)"})
	p = wantProblem(t, "a cell past the CPU budget", err, http.StatusTooManyRequests, "quota_exceeded")
	if !strings.Contains(p.Detail, "CPU-seconds") {
		t.Errorf("the problem does not name the budget: %q", p.Detail)
	}
	if _, err := bob.Usage(ctx, "someone-else"); err == nil {
		t.Error("bob read another user's usage")
	}
}
