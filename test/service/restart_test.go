package service_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/client"
)

// TestSIGKILLMidCell kills the service while cells run, starts it again
// on the same data directory, and checks what a user would: the history
// is intact (the cut-off cells say so), the workspace files are there, the
// session resumes with a fresh kernel, and nothing of the old run is left.
func TestSIGKILLMidCell(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 3*time.Minute)
	data := dataDir(t)
	srv := start(t, data)
	c := srv.client(srv.key)
	s1, err := c.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c.CreateSession(ctx, client.SessionRequest{Languages: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Exec(ctx, s1.ID, client.ExecRequest{Code: "x = 41\nopen('kept.txt', 'w').write('kept')\nx + 1"})
	if err != nil || x.Status != "ok" {
		t.Fatalf("first cell: %+v %v", x, err)
	}
	// Two cells run when the service dies.
	started := make(chan struct{}, 2)
	for id, code := range map[string]string{s1.ID: "import time; time.sleep(60)", s2.ID: "sleep 60"} {
		go c.ExecStream(ctx, id, client.ExecRequest{Code: code}, func(ev client.Event) {
			if ev.Type == client.EventStarted {
				started <- struct{}{}
			}
		})
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the long cells did not start")
		}
	}
	time.Sleep(300 * time.Millisecond)
	if err := srv.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	srv.Cmd.Wait()
	waitNothingRuns(t, "after SIGKILL")

	srv = start(t, data)
	defer srv.stop()
	c = srv.client(srv.key)
	hist, err := c.History(ctx, s1.ID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Executions) != 2 || hist.Executions[0].Status != "ok" || hist.Executions[1].Status != "interrupted" ||
		hist.Executions[1].Result == nil || !strings.Contains(hist.Executions[1].Result.Notice, "stopped") {
		t.Fatalf("history after the crash: %+v", hist)
	}
	s, err := c.Session(ctx, s1.ID)
	if err != nil || s.Status != "active" {
		t.Fatalf("session after the crash: %+v %v", s, err)
	}
	var buf bytes.Buffer
	if _, err := c.Download(ctx, s1.ID, "kept.txt", &buf); err != nil || buf.String() != "kept" {
		t.Fatalf("kept.txt after the crash: %q %v", buf.String(), err)
	}
	// The kernel is new: x is gone, the notice says why, files are usable.
	x, err = c.Exec(ctx, s1.ID, client.ExecRequest{Code: "x"})
	if err != nil || x.Status != "error" || x.Result.Error == nil || x.Result.Error.Name != "NameError" ||
		!strings.Contains(x.Result.Notice, "restarted") {
		t.Fatalf("x after the crash: %+v %v", x.Result, err)
	}
	x, err = c.Exec(ctx, s1.ID, client.ExecRequest{Code: "open('kept.txt', 'a').write('+more'); open('kept.txt').read()"})
	if err != nil || x.Status != "ok" || !strings.Contains(x.Result.Stdout+textOf(x.Result), "kept+more") {
		t.Fatalf("writing kept.txt after the crash: %+v %v", x.Result, err)
	}
	if x.Seq != 4 {
		t.Errorf("sequence after the crash = %d, want 4", x.Seq)
	}
	for _, id := range []string{s1.ID, s2.ID} {
		if err := c.DeleteSession(ctx, id); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
	}
	srv.stop()
	waitNoSandboxes(t, "after the stop")
	if m := workspaceMounts(t, data); len(m) != 0 {
		t.Errorf("workspace mounts left: %v", m)
	}
}

func textOf(r *client.CellResult) string {
	var b strings.Builder
	for _, o := range r.Outputs {
		b.Write(o.Data["text/plain"])
	}
	return b.String()
}
