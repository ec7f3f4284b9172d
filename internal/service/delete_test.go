package service

import (
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestDeleteWithRunningCell: deleting a session while a cell sleeps
// records that cell as interrupted with a notice naming the deletion, not
// as a sandbox failure, and logs no error.
func TestDeleteWithRunningCell(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, 2*time.Minute)
	u := ts.user(t, "alice", false)
	sess, err := ts.CreateSession(ctx, u, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	type answer struct {
		e   kiln.Execution
		err error
	}
	done := make(chan answer, 1)
	go func() {
		e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Code: "import time\nprint('sleeping', flush=True)\ntime.sleep(60)"},
			ExecEvents{Events: engine.Events{Stdout: func([]byte) {
				select {
				case started <- struct{}{}:
				default:
				}
			}}})
		done <- answer{e, err}
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the cell never printed")
	}
	if err := ts.DeleteSession(ctx, u, sess.ID); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the cell did not end when its session was deleted")
	}
	if a.err != nil {
		t.Fatalf("Exec: %v", a.err)
	}
	check := func(where string, e kiln.Execution) {
		t.Helper()
		if e.Status != string(kiln.StatusInterrupted) || e.Result == nil || !strings.Contains(e.Result.Notice, "deleted") || e.Result.Error != nil {
			t.Errorf("%s: status %s, result %+v; want interrupted with a notice that the session was deleted", where, e.Status, e.Result)
		}
	}
	check("Exec's answer", a.e)
	stored, err := ts.Execution(ctx, u, a.e.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("the history", stored)
	if logs := ts.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("deleting a session logged an error:\n%s", logs)
	}
}
