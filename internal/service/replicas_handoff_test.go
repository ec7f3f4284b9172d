//go:build linux

package service

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/backend/unboxed"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store/postgres"
	"github.com/kiln-dev/kiln/internal/store/postgres/pgtest"
	"github.com/kiln-dev/kiln/internal/workspace"
)

// sharedBackend is one backend both replicas of a test reach, as every
// replica reaches every Pod on a cluster: it says so (SharedSandboxes).
type sharedBackend struct{ engine.Backend }

func (sharedBackend) SharedSandboxes() bool { return true }

// newReplica is a service on the PostgreSQL at dsn, a replica among
// others on the same backend b, with its own data directory.
func newReplica(t *testing.T, dsn string, b engine.Backend, cfg Config) *testService {
	t.Helper()
	ctx := context.Background()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	cfg.DataDir = dir
	if cfg.Workspaces == "" {
		cfg.Workspaces = workspace.Plain
	}
	cfg.PoolSize = -1
	cfg.Replicas = postgres.NewReplicas(st)
	cfg.ReplicaGone = 3 * time.Second
	svc, err := New(ctx, cfg, st, engine.New(b, log), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		svc.Close(ctx)
		// The workspaces of sessions this replica let go of stay on its
		// host (SharedSandboxes): the test removes them.
		ids, _ := svc.ws.List()
		for _, id := range ids {
			svc.ws.Remove(id)
		}
		st.Close()
		if t.Failed() {
			t.Logf("replica %s:\n%s", svc.ReplicaID(), logs.String())
		}
	})
	return &testService{Service: svc, logs: logs}
}

// TestReplicasHandOffSession: two replicas on one PostgreSQL and one
// backend both reach. A session made on A moves to B when a request for
// it reaches B, onto the same sandbox (x set on A is read on B, then on
// A again), and a request on B while a long cell runs on A waits, then
// is answered busy (503), never with a second sandbox.
func TestReplicasHandOffSession(t *testing.T) {
	testHandOff(t, sharedBackend{unboxed.New(t.TempDir())}, workspace.Plain)
}

// TestReplicasHandOffSessionNative is TestReplicasHandOffSession on the
// native backend's sandboxes, which two replicas in one process share:
// a sandbox let go of is not destroyed, and the other attaches to it.
func TestReplicasHandOffSessionNative(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the native backend makes sandboxes")
	}
	nb, err := native.New(native.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	testHandOff(t, sharedBackend{nb}, workspace.Disk)
}

func testHandOff(t *testing.T, b engine.Backend, ws workspace.Kind) {
	dsn := pgtest.Start(t).Database(t)
	ctx := ctxT(t, 3*time.Minute)
	a := newReplica(t, dsn, b, Config{HandoffWait: 3 * time.Second, Workspaces: ws})
	r := newReplica(t, dsn, b, Config{HandoffWait: 3 * time.Second, Workspaces: ws})
	u := a.user(t, "ana", false)
	sess, err := a.CreateSession(ctx, u, SessionSpec{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(on *testService, code string) (kiln.Execution, error) {
		return on.Exec(ctx, u, sess.ID, kiln.CellRequest{Code: code}, ExecEvents{})
	}
	want := func(on *testService, name, code, out string) {
		t.Helper()
		x, err := run(on, code)
		if err != nil || x.Status != string(kiln.StatusOK) || x.Result.Stdout != out {
			t.Fatalf("%s: %q = %+v, %v; want stdout %q", name, code, x.Result, err, out)
		}
	}
	want(a, "on A", "x = 41\nprint('set')", "set\n")
	want(r, "on B after A", "print(x + 1)", "42\n")
	want(a, "on A after B", "x += 1\nprint(x)", "42\n")
	want(r, "on B again", "print(x)", "42\n")
	boxes, err := b.List(ctx)
	if err != nil || len(boxes) != 1 {
		t.Fatalf("sandboxes after three handoffs: %v %v; want one", boxes, err)
	}

	// A long cell on A (the session is on B now: A asks for it first).
	long := make(chan error, 1)
	go func() {
		x, err := run(a, "import time\ntime.sleep(8)\nprint(x)")
		if err == nil && x.Result.Stdout != "42\n" {
			err = errors.New("the long cell on A printed " + x.Result.Stdout)
		}
		long <- err
	}()
	running := func() bool {
		l := a.lookup(sess.ID)
		if l == nil {
			return false
		}
		_, idle := l.idleSince()
		return !idle
	}
	for deadline := time.Now().Add(30 * time.Second); !running(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long cell did not start on A")
		}
	}
	start := time.Now()
	_, err = run(r, "print('on B during the long cell')")
	var ke *kiln.Error
	if !errors.As(err, &ke) || ke.Kind != kiln.Unavailable || !strings.Contains(ke.Message, "is busy on kiln replica "+a.ReplicaID()) {
		t.Fatalf("a cell on B while A runs a long one: %v; want unavailable, busy on %s", err, a.ReplicaID())
	}
	if waited := time.Since(start); waited < 3*time.Second {
		t.Errorf("B answered busy after %v, before its 3s wait", waited)
	}
	if boxes, err := b.List(ctx); err != nil || len(boxes) != 1 {
		t.Fatalf("sandboxes while B waited: %v %v; want one", boxes, err)
	}
	if err := <-long; err != nil {
		t.Fatal(err)
	}
	// Once A is idle, B gets the session, state intact.
	want(r, "on B after the long cell", "print(x)", "42\n")

	// A request on A that stops waiting just as B hands the session
	// over: A's next request attaches to the sandbox left for it.
	if _, err := a.cfg.Replicas.AskRelease(ctx, a.ReplicaID(), sess.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); r.lookup(sess.ID) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B did not hand the session over")
		}
	}
	want(a, "on A after an abandoned wait", "print(x)", "42\n")
	if boxes, err := b.List(ctx); err != nil || len(boxes) != 1 {
		t.Fatalf("sandboxes at the end: %v %v; want one", boxes, err)
	}
}

// TestMovedWhileWaiting: a request that took a session just before this
// replica let go of it, and waits for the session's cells' turn, is let
// through once the handoff is done and told that the session moved (a
// 503 to send again), instead of waiting for ever or being told that the
// session ended.
func TestMovedWhileWaiting(t *testing.T) {
	l := newLive(kiln.Session{ID: "s1"}, t.TempDir(), nil)
	if _, ok := l.detach(); !ok {
		t.Fatal("an idle session was not let go of")
	}
	got := make(chan error, 1)
	go func() {
		defer l.hold()()
		if err := l.lockCells(context.Background(), nil); err != nil {
			got <- err
			return
		}
		defer l.unlockCells()
		_, err := l.sandbox(context.Background(), nil)
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // it waits for the cells' turn
	l.unlockCells()                    // what releaseOne does once the store says moved
	select {
	case err := <-got:
		if err != errMoved || kiln.KindOf(err) != kiln.Unavailable {
			t.Fatalf("the waiting request got %v, want errMoved (unavailable)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request hung")
	}
}
