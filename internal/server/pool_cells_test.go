package server_test

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/service"
)

// TestPooledSessionCellNumbers: the pool's warm-up cell takes no number,
// so a pooled session's first cell is <cell 1> in its traceback.
func TestPooledSessionCellNumbers(t *testing.T) {
	e := newEnv(t, options{svc: service.Config{PoolSize: 1}})
	ctx := ctxT(t)
	c := e.user("nia")
	waitMetric(t, e, `kiln_pool_ready 1`)
	s, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m := metricsText(t, e); !strings.Contains(m, `kiln_sessions_created_total{source="pool"} 1`) {
		t.Fatalf("the session was not pooled:\n%s", grep(m, "kiln_sessions_created_total"))
	}
	for i, want := range []string{`File "<cell 1>", line 1`, `File "<cell 2>", line 2`} {
		code := "1/0"
		if i == 1 {
			code = "x = 1\n1/0"
		}
		x, err := c.Exec(ctx, s.ID, client.ExecRequest{Code: code})
		if err != nil || x.Result == nil || x.Result.Error == nil {
			t.Fatalf("cell %d: %+v %v", i+1, x, err)
		}
		if tb := strings.Join(x.Result.Error.Traceback, "\n"); !strings.Contains(tb, want) {
			t.Errorf("cell %d: traceback %q lacks %q", i+1, tb, want)
		}
	}
}
