package service

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestLongCellsOfOneUserDoNotStallAnother: on the default configuration,
// alice runs more sleeping cells than one user may run at once; bob's
// print(1) starts at once (no queued event) and ends long before her
// cells do, and alice's extra cell says it is queued behind her own.
func TestLongCellsOfOneUserDoNotStallAnother(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, 3*time.Minute)
	alice, bob := ts.user(t, "alice", false), ts.user(t, "bob", false)
	n := ts.cfg.UserConcurrency + 1
	var wg sync.WaitGroup
	var mu sync.Mutex
	var places []Place
	running := make(chan struct{}, n)
	var ids []string
	t.Cleanup(func() {
		for _, id := range ids {
			ts.DeleteSession(ctx, alice, id)
		}
		wg.Wait()
	})
	for i := range n {
		sess, err := ts.CreateSession(ctx, alice, SessionSpec{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sess.ID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := ExecEvents{
				Queued: func(p Place) { mu.Lock(); places = append(places, p); mu.Unlock() },
				Events: engine.Events{Stdout: func([]byte) {
					select {
					case running <- struct{}{}:
					default: // more chunks than cells: never block the cell
					}
				}},
			}
			ts.Exec(ctx, alice, sess.ID, kiln.CellRequest{Code: fmt.Sprintf("import time\nprint(%d, flush=True)\ntime.sleep(120)", i), Timeout: 5 * time.Minute}, ev)
		}()
	}
	for range n - 1 {
		select {
		case <-running:
		case <-time.After(90 * time.Second):
			t.Fatal("alice's cells did not all start")
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := append([]Place(nil), places...)
		mu.Unlock()
		if len(got) == 1 && got[0] == (Place{Position: 1, Reason: WaitUser}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's queued events: %+v, want one at position 1 with reason user", got)
		}
		time.Sleep(20 * time.Millisecond)
	}

	sess, err := ts.CreateSession(ctx, bob, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bobQueued := false
	e, err := ts.Exec(ctx, bob, sess.ID, kiln.CellRequest{Code: "print(1)"}, ExecEvents{Queued: func(Place) { bobQueued = true }})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != string(kiln.StatusOK) || !strings.Contains(e.Result.Stdout, "1") {
		t.Fatalf("bob's print(1): status %s, result %+v", e.Status, e.Result)
	}
	if bobQueued || took > 60*time.Second {
		t.Errorf("bob's print(1) queued=%v and took %v while alice's cells slept; want no wait", bobQueued, took)
	}
	t.Logf("bob's print(1) took %v with %d of alice's cells sleeping", took, n-1)
}

// TestCellBehindItsSessionsCellSaysSo: a second cell sent to a session
// whose cell still runs is told it waits for that one (reason session),
// then runs once the first ends.
func TestCellBehindItsSessionsCellSaysSo(t *testing.T) {
	ts := newTestService(t, Config{})
	ctx := ctxT(t, 2*time.Minute)
	u := ts.user(t, "carol", false)
	sess, err := ts.CreateSession(ctx, u, SessionSpec{})
	if err != nil {
		t.Fatal(err)
	}
	printed := make(chan struct{}, 1)
	first := make(chan error, 1)
	go func() {
		_, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Code: "import time\nprint('zzz', flush=True)\ntime.sleep(90)", Timeout: 2 * time.Minute},
			ExecEvents{Events: engine.Events{Stdout: func([]byte) {
				select {
				case printed <- struct{}{}:
				default:
				}
			}}})
		first <- err
	}()
	select {
	case <-printed:
	case <-time.After(60 * time.Second):
		t.Fatal("the first cell did not start")
	}
	var mu sync.Mutex
	var places []Place
	second := make(chan error, 1)
	go func() {
		e, err := ts.Exec(ctx, u, sess.ID, kiln.CellRequest{Code: "print(2)"}, ExecEvents{Queued: func(p Place) {
			mu.Lock()
			places = append(places, p)
			mu.Unlock()
			if p.Reason == WaitSession {
				ts.Interrupt(ctx, u, sess.ID)
			}
		}})
		if err == nil && e.Status != string(kiln.StatusOK) {
			err = fmt.Errorf("status %s", e.Status)
		}
		second <- err
	}()
	if err := <-second; err != nil {
		t.Fatalf("the second cell: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first cell: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(places) != 1 || places[0] != (Place{Position: 1, Reason: WaitSession}) {
		t.Errorf("the second cell's queued events: %+v, want one at position 1 with reason session", places)
	}
}
