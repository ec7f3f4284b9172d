package service_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to count audit entries

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/store/postgres/pgtest"
)

// replicaGone is the replicas' heartbeat bound in these tests.
const replicaGone = "3s"

// startReplica runs kiln serve on data against the PostgreSQL dsn. The
// first replica makes the admin key; the others use it (key from that
// replica's data directory).
func startReplica(t *testing.T, data, dsn, keyFrom string) *server {
	t.Helper()
	if keyFrom != "" {
		b, err := os.ReadFile(filepath.Join(keyFrom, "admin.key"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "admin.key"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A replica these tests SIGKILL is never started again on its data
	// directory, which on Docker is what reaps its containers: they are
	// removed when the test ends, so that later tests count only theirs.
	t.Cleanup(func() { removeDockerContainers(t, data) })
	return start(t, data, "--db", dsn, "--replica-gone", replicaGone)
}

// TestReplicasShareOnePostgres runs two kiln serve processes on one
// PostgreSQL and checks what a user and an operator would: a session made
// on A is refused on B with a conflict naming A (no second sandbox), and
// its history reads on B; after A is SIGKILLed mid-cell, B takes the
// session over on the next request with the history intact; and with
// both replicas running, each idle session is ended exactly once
// (one session.end audit entry), including one whose replica is gone.
func TestReplicasShareOnePostgres(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 5*time.Minute)
	dsn := pgtest.Start(t).Database(t)
	dataA, dataB, dataC := dataDir(t), dataDir(t), dataDir(t)
	a := startReplica(t, dataA, dsn, "")
	b := startReplica(t, dataB, dsn, dataA)
	ca, cb := a.client(a.key), b.client(a.key)

	s, err := ca.CreateSession(ctx, client.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := ca.Exec(ctx, s.ID, client.ExecRequest{Code: "x = 41\nx + 1"})
	if err != nil || x.Status != "ok" {
		t.Fatalf("first cell on A: %+v %v", x, err)
	}

	// B must not start a second sandbox for A's session.
	_, err = cb.Exec(ctx, s.ID, client.ExecRequest{Code: "1"})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 409 || !strings.Contains(p.Detail, "held by kiln replica") {
		t.Fatalf("a cell on B in A's session: want 409 naming the holder, got %v", err)
	}
	if h, err := cb.History(ctx, s.ID, 0, ""); err != nil || len(h.Executions) != 1 {
		t.Fatalf("history on B: %+v %v", h, err)
	}

	// A dies mid-cell, in the middle of the client's stream; B takes over
	// once A's heartbeat is stale.
	started := make(chan string, 1)
	streamed := make(chan error, 1)
	go func() {
		_, err := ca.ExecStream(ctx, s.ID, client.ExecRequest{Code: "print('before', flush=True)\nimport time; time.sleep(60)"}, func(ev client.Event) {
			if ev.Type == client.EventStarted && ev.Execution != nil {
				started <- ev.Execution.ID
			}
		})
		streamed <- err
	}()
	var cut string
	select {
	case cut = <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the long cell did not start on A")
	}
	if err := a.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.Cmd.Wait()
	select {
	case err := <-streamed:
		if err == nil {
			t.Error("the stream from the killed replica ended without an error, as if the cell had finished")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the client's stream hung after its replica was killed")
	}
	var y *client.Execution
	for deadline := time.Now().Add(time.Minute); ; {
		y, err = cb.Exec(ctx, s.ID, client.ExecRequest{Code: "print('on B')"})
		if err == nil || !errors.As(err, &p) || p.Status != 409 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil || y.Status != "ok" || y.Result.Stdout != "on B\n" || !strings.Contains(y.Result.Notice, "replica") {
		t.Fatalf("the cell on B after A died: %+v %v", y, err)
	}
	h, err := cb.History(ctx, s.ID, 0, "")
	if err != nil || len(h.Executions) != 3 {
		t.Fatalf("history after the takeover: %+v %v", h, err)
	}
	if e := h.Executions[0]; e.Code != "x = 41\nx + 1" || e.Status != "ok" {
		t.Errorf("the first cell's record: %+v", e)
	}
	// The first cell's whole result, as A answered it, reads back on B.
	if got, _ := json.Marshal(h.Executions[0].Result); string(got) != string(mustJSON(t, x.Result)) {
		t.Errorf("the first cell's result on B:\n%s\nwant, as A answered it:\n%s", got, mustJSON(t, x.Result))
	}
	if e := h.Executions[1]; e.ID != cut || e.Status != "interrupted" || e.Result == nil || !strings.Contains(e.Result.Notice, "kiln stopped while this cell ran") {
		t.Errorf("the cell cut off with A (%s): %+v, want it interrupted, saying so", cut, e)
	}

	// Idle reaping with A (restarted) and B both running: a session of
	// each, and one of C, a replica that is gone.
	c := startReplica(t, dataC, dsn, dataA)
	short := client.SessionRequest{Languages: []string{"bash"}, IdleTTLSeconds: 2}
	sc, err := c.client(a.key).CreateSession(ctx, short)
	if err != nil {
		t.Fatal(err)
	}
	c.Cmd.Process.Kill()
	c.Cmd.Wait()
	a = startReplica(t, dataA, dsn, "")
	ca = a.client(a.key)
	sa, err := ca.CreateSession(ctx, short)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := cb.CreateSession(ctx, short)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, id := range []string{sa.ID, sb.ID, sc.ID} {
		for deadline := time.Now().Add(90 * time.Second); ; {
			got, err := ca.Session(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status == "ended" {
				if !strings.HasPrefix(got.EndReason, "idle") {
					t.Errorf("session %s ended for %q, want idle", id, got.EndReason)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s was not reaped: %+v", id, got)
			}
			time.Sleep(time.Second)
		}
	}
	// Both replicas keep checking for a while: still one end each.
	time.Sleep(12 * time.Second)
	for _, id := range []string{sa.ID, sb.ID, sc.ID} {
		var n int
		if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'session.end' AND session_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("session %s: %d session.end audit entries, want 1", id, n)
		}
	}
}

// TestReplicasShareSessionCap: the per-user session cap counts the
// user's sessions on every replica, so two replicas do not each allow
// the whole cap.
func TestReplicasShareSessionCap(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 3*time.Minute)
	dsn := pgtest.Start(t).Database(t)
	dataA, dataB := dataDir(t), dataDir(t)
	a := start(t, dataA, "--db", dsn, "--max-sessions", "2")
	if err := os.WriteFile(filepath.Join(dataB, "admin.key"), []byte(a.key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := start(t, dataB, "--db", dsn, "--max-sessions", "2")
	ca, cb := a.client(a.key), b.client(a.key)
	bash := client.SessionRequest{Languages: []string{"bash"}}
	if _, err := ca.CreateSession(ctx, bash); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.CreateSession(ctx, bash); err != nil {
		t.Fatal(err)
	}
	_, err := ca.CreateSession(ctx, bash)
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 429 || !strings.Contains(p.Detail, "2 active sessions") {
		t.Fatalf("a third session with a cap of 2, one on each replica: want 429, got %v", err)
	}
}

// TestReplicasShareCPUBudget: CPU time used on one replica counts
// against the daily budget on the other, even after the other has read
// the user's count.
func TestReplicasShareCPUBudget(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 3*time.Minute)
	dsn := pgtest.Start(t).Database(t)
	dataA, dataB := dataDir(t), dataDir(t)
	a := start(t, dataA, "--db", dsn, "--cpu-seconds-per-day", "1")
	if err := os.WriteFile(filepath.Join(dataB, "admin.key"), []byte(a.key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := start(t, dataB, "--db", dsn, "--cpu-seconds-per-day", "1")
	ca, cb := a.client(a.key), b.client(a.key)
	bash := client.SessionRequest{Languages: []string{"bash"}}
	sa, err := ca.CreateSession(ctx, bash)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := cb.CreateSession(ctx, bash)
	if err != nil {
		t.Fatal(err)
	}
	if x, err := cb.Exec(ctx, sb.ID, client.ExecRequest{Code: "true"}); err != nil || x.Status != "ok" {
		t.Fatalf("a first cell on B: %+v %v", x, err)
	}
	// Burn over a CPU-second on A: a count, not a wall-clock span, which
	// a loaded machine filled with less than a CPU-second (load 47).
	if x, err := ca.Exec(ctx, sa.ID, client.ExecRequest{Code: `i=0; while [ $i -lt 2500000 ]; do i=$((i+1)); done`}); err != nil || x.Status != "ok" {
		t.Fatalf("the burning cell on A: %+v %v", x, err)
	}
	_, err = cb.Exec(ctx, sb.ID, client.ExecRequest{Code: "true"})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 429 || !strings.Contains(p.Detail, "CPU-seconds") {
		t.Fatalf("a cell on B after A used the budget: want 429, got %v", err)
	}
}

// TestReplicasResumeBatchOnce kills the replica running a batch; of the
// two replicas left, exactly one resumes it, and the batch finishes with
// every item judged once.
func TestReplicasResumeBatchOnce(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 4*time.Minute)
	dsn := pgtest.Start(t).Database(t)
	dataA, dataB, dataC := dataDir(t), dataDir(t), dataDir(t)
	a := startReplica(t, dataA, dsn, "")
	b := startReplica(t, dataB, dsn, dataA)
	c := startReplica(t, dataC, dsn, dataA)
	ca, cb := a.client(a.key), b.client(a.key)
	want := "ok\n"
	var items []client.BatchItem
	for range 6 {
		items = append(items, client.BatchItem{Language: "bash", Code: "sleep 2; echo ok", Check: client.BatchCheck{Stdout: &want}})
	}
	bt, err := ca.CreateBatch(ctx, client.BatchRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // items are running on A
	a.Cmd.Process.Kill()
	a.Cmd.Wait()
	var got *client.Batch
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		if got, err = cb.Batch(ctx, bt.ID); err != nil {
			t.Fatal(err)
		}
		if got.Status == "done" || time.Now().After(deadline) {
			break
		}
	}
	if got.Status != "done" || got.Done != 6 || got.Passed != 6 {
		t.Fatalf("the batch after A died: %+v", got)
	}
	resumed := 0
	for _, s := range []*server{b, c} {
		resumed += strings.Count(s.Logs(), "resuming the batch of a gone replica")
	}
	if resumed != 1 {
		t.Errorf("the batch was resumed %d times by the replicas left, want once:\nB:\n%s\nC:\n%s", resumed, b.Logs(), c.Logs())
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM audit_log WHERE action = 'batch.done' AND detail LIKE '%' || $1 || '%'`, bt.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d batch.done audit entries, want 1", n)
	}
}

// TestReplicasPausedHolderLetsGo pauses the replica holding a session
// (SIGSTOP) past the bound, lets another take the session over, and
// resumes the first: at its next heartbeat it lets go of the session,
// so a request reaching it gets 409 naming the new holder instead of a
// second sandbox running the session.
func TestReplicasPausedHolderLetsGo(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 3*time.Minute)
	dsn := pgtest.Start(t).Database(t)
	dataA, dataB := dataDir(t), dataDir(t)
	a := startReplica(t, dataA, dsn, "")
	b := startReplica(t, dataB, dsn, dataA)
	ca, cb := a.client(a.key), b.client(a.key)
	s, err := ca.CreateSession(ctx, client.SessionRequest{Languages: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	if x, err := ca.Exec(ctx, s.ID, client.ExecRequest{Code: "echo on A"}); err != nil || x.Status != "ok" {
		t.Fatalf("a cell on A: %+v %v", x, err)
	}
	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer a.Cmd.Process.Signal(syscall.SIGCONT)
	var p *client.Problem
	var x *client.Execution
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		x, err = cb.Exec(ctx, s.ID, client.ExecRequest{Code: "echo on B"})
		if err == nil || !errors.As(err, &p) || p.Status != 409 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || x.Result.Stdout != "on B\n" {
		t.Fatalf("the cell on B while A is paused: %+v %v", x, err)
	}
	a.Cmd.Process.Signal(syscall.SIGCONT)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		_, err = ca.Exec(ctx, s.ID, client.ExecRequest{Code: "echo on A again"})
		if errors.As(err, &p) && p.Status == 409 && strings.Contains(p.Detail, "held by kiln replica") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A still serves the session B took over: %v", err)
		}
	}
}

// TestReplicasShareRateLimit: one API key's requests to two replicas
// draw on one bucket, so together they are refused at the key's burst,
// not at twice it, with a 429 that says when to retry.
func TestReplicasShareRateLimit(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 3*time.Minute)
	dsn := pgtest.Start(t).Database(t)
	dataA, dataB := dataDir(t), dataDir(t)
	const burst = 6
	limits := []string{"--rate", "0.2", "--burst", "6"}
	a := start(t, dataA, append([]string{"--db", dsn, "--replica-gone", replicaGone}, limits...)...)
	if err := os.WriteFile(filepath.Join(dataB, "admin.key"), []byte(a.key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := start(t, dataB, append([]string{"--db", dsn, "--replica-gone", replicaGone}, limits...)...)
	admin := a.client(a.key)
	u, err := admin.CreateUser(ctx, client.UserRequest{Name: "rate"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateKey(ctx, u.ID, "rate")
	if err != nil {
		t.Fatal(err)
	}
	clients := []*client.Client{a.client(k.Secret), b.client(k.Secret)}
	ok := 0
	var p *client.Problem
	for i := 0; i < 4*burst; i++ {
		_, err := clients[i%2].ListSessions(ctx, client.ListOptions{})
		if err == nil {
			ok++
			continue
		}
		if !errors.As(err, &p) || p.Status != 429 || p.RetryAfterSeconds < 1 {
			t.Fatalf("request %d: want 429 with Retry-After, got %v", i, err)
		}
		break
	}
	// 0.2 a second refills at most one token while the test runs.
	if ok < burst || ok > burst+1 {
		t.Fatalf("%d requests passed across both replicas before the 429, want the key's burst of %d (each replica alone would allow %d)", ok, burst, burst)
	}
	if !strings.Contains(p.Detail, "too many requests") {
		t.Errorf("the 429's detail: %q", p.Detail)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplicasShareUserConcurrency: with --user-concurrency 1 on two
// replicas, a user's cell on B waits (queued, reason "user") while the
// user's cell on A runs, and starts once it is done, instead of each
// replica running one.
func TestReplicasShareUserConcurrency(t *testing.T) {
	needRoot(t)
	ctx := ctxT(t, 3*time.Minute)
	dsn := pgtest.Start(t).Database(t)
	dataA, dataB := dataDir(t), dataDir(t)
	flags := []string{"--db", dsn, "--replica-gone", replicaGone, "--user-concurrency", "1"}
	a := start(t, dataA, flags...)
	if err := os.WriteFile(filepath.Join(dataB, "admin.key"), []byte(a.key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := start(t, dataB, flags...)
	ca, cb := a.client(a.key), b.client(a.key)
	bash := client.SessionRequest{Languages: []string{"bash"}}
	sa, err := ca.CreateSession(ctx, bash)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := cb.CreateSession(ctx, bash)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	long := make(chan *client.Execution, 1)
	go func() {
		x, err := ca.ExecStream(ctx, sa.ID, client.ExecRequest{Code: "sleep 4; echo A"}, func(ev client.Event) {
			if ev.Type == client.EventStarted {
				close(started)
			}
		})
		if err != nil {
			t.Errorf("the long cell on A: %v", err)
		}
		long <- x
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the long cell did not start on A")
	}
	var reason string
	y, err := cb.ExecStream(ctx, sb.ID, client.ExecRequest{Code: "echo B"}, func(ev client.Event) {
		if ev.Type == client.EventQueued && reason == "" {
			reason = ev.Reason
		}
	})
	if err != nil || y.Status != "ok" {
		t.Fatalf("the cell on B: %+v %v", y, err)
	}
	x := <-long
	if x == nil || x.Ended == nil {
		t.Fatalf("the cell on A: %+v", x)
	}
	if reason != "user" {
		t.Errorf("the cell on B was queued for %q, want \"user\"", reason)
	}
	if y.Started.Before(*x.Ended) {
		t.Errorf("the user's cell on B started at %v, before the cell on A ended at %v: two ran at once with --user-concurrency 1", y.Started, *x.Ended)
	}
}
