//go:build kubernetes && linux

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/store/postgres/pgtest"
)

// Two kiln serve processes on one PostgreSQL and the test cluster, as two
// replicas of the deployment are: a session made on A serves a cell on B
// (handed over, not refused), with the kernel's state; B is SIGKILLed in
// the middle of a streamed cell, and A, once B's heartbeat is stale,
// takes the session over on the same Pod, kernel state intact, the cut
// cell recorded as interrupted, and the Pod of a one-shot run B was
// serving is destroyed by A. Then A stops gracefully and C takes the
// session over at once on the same Pod. One session Pod throughout.
func TestServeKubernetesReplicas(t *testing.T) {
	kubeconfig, _, cs := testCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns := testNamespace(t, cs, "kiln-replicas-test")
	dsn := pgtest.Start(t).Database(t)
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	bin := buildKubeKiln(t, dir)
	keyFile := filepath.Join(dir, "admin.key")
	replica := func(name string) (*client.Client, *exec.Cmd) {
		data := filepath.Join(dir, name)
		os.Mkdir(data, 0o711)
		cmd, addr := kubeServe(t, bin, filepath.Join(dir, name+".log"), "--kubeconfig", kubeconfig, "--namespace", ns,
			"--data", data, "--admin-key-file", keyFile, "--db", dsn, "--replica-gone", "3s")
		key, err := os.ReadFile(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New("http://"+addr, strings.TrimSpace(string(key)))
		if err != nil {
			t.Fatal(err)
		}
		return c, cmd
	}
	ca, a := replica("a")
	cb, b := replica("b")
	pods := func() []string {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kiln"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		return names
	}
	logs := func() string {
		a, _ := os.ReadFile(filepath.Join(dir, "a.log"))
		b, _ := os.ReadFile(filepath.Join(dir, "b.log"))
		return "replica a:\n" + string(a) + "\nreplica b:\n" + string(b)
	}

	s, err := ca.CreateSession(ctx, client.SessionRequest{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	if x, err := ca.Exec(ctx, s.ID, client.ExecRequest{Code: "x = 41"}); err != nil || x.Status != "ok" {
		t.Fatalf("x = 41 on A: %+v %v", x, err)
	}
	box := pods()
	if len(box) != 1 {
		t.Fatalf("Pods after one session's first cell: %v; want 1", box)
	}
	x, err := cb.Exec(ctx, s.ID, client.ExecRequest{Code: "print(x + 1)"})
	if err != nil || x.Status != "ok" || x.Result.Stdout != "42\n" {
		t.Fatalf("a cell on B for A's session: %+v %v; want 42, the session handed over with its kernel\n%s", x, err, logs())
	}
	if got := pods(); len(got) != 1 || got[0] != box[0] {
		t.Errorf("Pods after the handoff: %v; want the same one, %v", got, box)
	}

	// B dies in the middle of a streamed cell, and of a one-shot run
	// whose Pod no session will take over.
	go cb.Run(ctx, client.RunRequest{Language: "python", Code: "import time; time.sleep(300)"})
	for deadline := time.Now().Add(time.Minute); len(pods()) < 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the one-shot run on B made no Pod: %v\n%s", pods(), logs())
		}
	}
	started := make(chan string, 1)
	streamed := make(chan error, 1)
	go func() {
		_, err := cb.ExecStream(ctx, s.ID, client.ExecRequest{Code: "y = 1\nprint('before', flush=True)\nimport time; time.sleep(120)"}, func(ev client.Event) {
			if ev.Type == client.EventStarted && ev.Execution != nil {
				started <- ev.Execution.ID
			}
		})
		streamed <- err
	}()
	var cut string
	select {
	case cut = <-started:
	case <-time.After(time.Minute):
		t.Fatalf("the long cell did not start on B\n%s", logs())
	}
	time.Sleep(time.Second) // y = 1 has run
	b.Process.Kill()
	select {
	case err := <-streamed:
		if err == nil {
			t.Error("the stream from the killed replica ended without an error, as if the cell had finished")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the client's stream hung after its replica was killed")
	}
	// The client goes on with A: refused while B's heartbeat is fresh,
	// then taken over.
	var p *client.Problem
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		x, err = ca.Exec(ctx, s.ID, client.ExecRequest{Code: "print(x, y)"})
		if err == nil || !errors.As(err, &p) || p.Status != 409 && p.Status != 503 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || x.Status != "ok" || x.Result.Stdout != "41 1\n" {
		t.Fatalf("the cell on A after B died: %+v %v; want \"41 1\": the same kernel\n%s", x, err, logs())
	}
	h, err := ca.History(ctx, s.ID, 0, "")
	if err != nil || len(h.Executions) != 4 {
		t.Fatalf("history after the takeover: %+v %v; want 4 cells", h, err)
	}
	if e := h.Executions[2]; e.ID != cut || e.Status != "interrupted" {
		t.Errorf("the cell cut off with B (%s): %+v; want it interrupted", cut, e)
	}
	// A destroys the run's Pod once B has been gone for twice
	// --replica-gone; the session's stays.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		got := pods()
		if len(got) == 1 && got[0] == box[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pods a minute after B died: %v; want only the session's %v\n%s", got, box, logs())
		}
	}
	// A stops gracefully, as in a rolling update: it lets go of the Pod
	// and leaves, so C, started meanwhile, takes the session over at the
	// first request, kernel intact (not after --replica-gone, nor a 503
	// after asking the stopped A for it).
	cc, _ := replica("c")
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// (kubeServe's goroutine waits for it; a signal to a reaped process fails)
	for deadline := time.Now().Add(time.Minute); a.Process.Signal(syscall.Signal(0)) == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("A did not stop within a minute of SIGTERM\n%s", logs())
		}
	}
	x, err = cc.Exec(ctx, s.ID, client.ExecRequest{Code: "print(x, y)"})
	if err != nil || x.Status != "ok" || x.Result.Stdout != "41 1\n" {
		t.Fatalf("the first cell on C after A stopped: %+v %v; want \"41 1\" at once: the same kernel\n%s", x, err, logs())
	}
	if got := pods(); len(got) != 1 || got[0] != box[0] {
		t.Errorf("Pods after A stopped: %v; want the same one, %v", got, box)
	}
	if err := cc.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); len(pods()) > 0; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Pods after the session ended: %v; want none", pods())
		}
	}
}
