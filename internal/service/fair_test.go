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
			ts.Exec(ctx, alice, sess.ID, CellRequest{Code: fmt.Sprintf("import time\nprint(%d, flush=True)\ntime.sleep(120)", i), Timeout: 5 * time.Minute}, ev)
		}()
	}
	for range n - 1 {
		select {
		case <-running:
		case <-time.After(90 * time.Second):
			t.Fatal("alice's cells did not all start")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
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
	e, err := ts.Exec(ctx, bob, sess.ID, CellRequest{Code: "print(1)"}, ExecEvents{Queued: func(Place) { bobQueued = true }})
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
