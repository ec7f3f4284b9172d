package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/postgres"
)

// TestReplicaClaimsOnce races eight live replicas for a session, a batch
// and an idle session whose holder is gone, and checks that each is
// taken by exactly one, and that a live holder keeps its session.
func TestReplicaClaimsOnce(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, freshDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := postgres.NewReplicas(s)
	const gone = 10 * time.Second
	ids := []string{"a"}
	for i := range 8 {
		ids = append(ids, fmt.Sprintf("r%d", i))
	}
	for _, id := range ids {
		if err := r.Heartbeat(ctx, id, "", true); err != nil {
			t.Fatal(err)
		}
	}
	u := store.User{Name: "u"}
	if err := s.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	sess := store.Session{UserID: u.ID, Languages: []string{"python"}, IdleTTL: time.Second, Created: time.Now().Add(-time.Hour)}
	if err := s.CreateSession(ctx, &sess); err != nil {
		t.Fatal(err)
	}
	if err := r.Hold(ctx, "a", sess.ID); err != nil {
		t.Fatal(err)
	}
	if h, err := r.ClaimSession(ctx, "r0", sess.ID, gone); !errors.Is(err, postgres.ErrHeld) || h != "a" {
		t.Fatalf("claim of a live replica's session = %q, %v; want a, ErrHeld", h, err)
	}
	b := store.Batch{UserID: u.ID, Created: time.Now()}
	if err := s.CreateBatch(ctx, &b, []string{`{}`}); err != nil {
		t.Fatal(err)
	}
	// a stops heartbeating.
	if _, err := s.SQL().ExecContext(ctx, `UPDATE replicas SET heartbeat = now() - interval '1 hour' WHERE id = 'a'`); err != nil {
		t.Fatal(err)
	}
	race := func(fn func(me string) bool) (won []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, me := range ids[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if fn(me) {
					mu.Lock()
					won = append(won, me)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return won
	}
	won := race(func(me string) bool {
		h, err := r.ClaimSession(ctx, me, sess.ID, gone)
		if err != nil && !errors.Is(err, postgres.ErrHeld) {
			t.Error(err)
		}
		return err == nil && h == me
	})
	if len(won) != 1 {
		t.Fatalf("session taken over by %v, want exactly one replica", won)
	}
	// The old holder learns at its next heartbeat that it lost the session.
	if lost, err := r.Lost(ctx, "a", []string{sess.ID}); err != nil || len(lost) != 1 || lost[0] != sess.ID {
		t.Errorf("Lost for the old holder = %v, %v; want the session", lost, err)
	}
	if lost, err := r.Lost(ctx, won[0], []string{sess.ID}); err != nil || len(lost) != 0 {
		t.Errorf("Lost for the new holder = %v, %v; want none", lost, err)
	}
	won = race(func(me string) bool {
		ok, err := r.ClaimBatch(ctx, me, b.ID, gone)
		if err != nil {
			t.Error(err)
		}
		return ok
	})
	if len(won) != 1 {
		t.Errorf("batch claimed by %v, want exactly one replica", won)
	}
	// The session's new holder goes too; its idle session is reaped once.
	if _, err := s.SQL().ExecContext(ctx, `UPDATE replicas SET heartbeat = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	var reaps []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, me := range []string{"x", "y", "z", "w"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := r.ReapIdle(ctx, me, nil, "idle", time.Now(), gone)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, g := range got {
				reaps = append(reaps, me+":"+g.ID)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(reaps) != 1 {
		t.Errorf("reaps %v, want the idle session ended once", reaps)
	}
	got, err := s.Session(ctx, u.ID, sess.ID)
	if err != nil || got.Status != store.SessionEnded || got.EndReason != "idle" {
		t.Errorf("session after reaping: %+v %v", got, err)
	}
}

// TestReplicaPrune deletes the row of a replica gone long ago that holds
// nothing, and keeps a gone one that still holds a session and a live one.
func TestReplicaPrune(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, freshDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := postgres.NewReplicas(s)
	for _, id := range []string{"old", "holder", "live"} {
		if err := r.Heartbeat(ctx, id, "", true); err != nil {
			t.Fatal(err)
		}
	}
	u := store.User{Name: "u"}
	if err := s.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	sess := store.Session{UserID: u.ID, Languages: []string{"python"}, IdleTTL: time.Hour}
	if err := s.CreateSession(ctx, &sess); err != nil {
		t.Fatal(err)
	}
	if err := r.Hold(ctx, "holder", sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SQL().ExecContext(ctx, `UPDATE replicas SET heartbeat = now() - interval '2 days' WHERE id <> 'live'`); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Prune(ctx, 24*time.Hour); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1 (old)", n, err)
	}
	var left []string
	rows, err := s.SQL().QueryContext(ctx, `SELECT id FROM replicas ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		rows.Scan(&id)
		left = append(left, id)
	}
	if fmt.Sprint(left) != "[holder live]" {
		t.Errorf("replicas left %v, want [holder live]", left)
	}
}

// TestReplicaHandoff: a live holder's session moves only when another
// replica asked for it and has not taken the request back, in one step
// that names one holder; the sandbox left for the new holder is read
// once; and the holder is woken by NOTIFY when asked.
func TestReplicaHandoff(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, freshDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := postgres.NewReplicas(s)
	u := store.User{Name: "u"}
	if err := s.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	sess := store.Session{UserID: u.ID, Languages: []string{"python"}, IdleTTL: time.Hour}
	if err := s.CreateSession(ctx, &sess); err != nil {
		t.Fatal(err)
	}
	if err := r.Hold(ctx, "ho-a", sess.ID); err != nil {
		t.Fatal(err)
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	woken := make(chan struct{}, 8)
	go r.Listen(lctx, "ho-a", func() { woken <- struct{}{} })
	select {
	case <-woken: // the first read, once listening
	case <-time.After(30 * time.Second):
		t.Fatal("Listen did not start")
	}

	if h, err := r.AskRelease(ctx, "ho-b", sess.ID); err != nil || h != "ho-a" {
		t.Fatalf("AskRelease = %q, %v; want ho-a", h, err)
	}
	select {
	case <-woken:
	case <-time.After(30 * time.Second):
		t.Fatal("the holder was not notified of the request")
	}
	if ids, err := r.Releases(ctx, "ho-a"); err != nil || len(ids) != 1 || ids[0] != sess.ID {
		t.Fatalf("Releases(holder) = %v, %v", ids, err)
	}
	if _, err := r.Release(ctx, "ho-b", sess.ID, "{}"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Release by a replica that does not hold the session: %v, want ErrNotFound", err)
	}
	if err := r.Withdraw(ctx, "ho-b", sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Release(ctx, "ho-a", sess.ID, "{}"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Release of a withdrawn request: %v, want ErrNotFound", err)
	}
	if h, _ := r.Holder(ctx, sess.ID); h != "ho-a" {
		t.Fatalf("holder after a withdrawn request: %q, want ho-a", h)
	}

	if _, err := r.AskRelease(ctx, "ho-b", sess.ID); err != nil {
		t.Fatal(err)
	}
	if to, err := r.Release(ctx, "ho-a", sess.ID, `{"ID":"box"}`); err != nil || to != "ho-b" {
		t.Fatalf("Release = %q, %v; want ho-b", to, err)
	}
	if h, box, err := r.HandedOver(ctx, "ho-a", sess.ID); err != nil || h != "ho-b" || box != "" {
		t.Fatalf("HandedOver for the old holder = %q, %q, %v; want ho-b and no sandbox", h, box, err)
	}
	if h, box, err := r.HandedOver(ctx, "ho-b", sess.ID); err != nil || h != "ho-b" || box != `{"ID":"box"}` {
		t.Fatalf("HandedOver for the new holder = %q, %q, %v", h, box, err)
	}
	if _, box, _ := r.HandedOver(ctx, "ho-b", sess.ID); box != "" {
		t.Fatalf("the sandbox was handed over twice: %q", box)
	}
	if ids, err := r.Releases(ctx, "ho-a"); err != nil || len(ids) != 0 {
		t.Fatalf("requests left after the handoff: %v, %v", ids, err)
	}
}

// TestReplicaTakeTokens: two replicas (two connections pools, as two
// processes have) draw one key's tokens from one bucket, refused at the
// burst with the wait for the next token; a refused request costs no
// bucket anything (all or none), so another key of the same user keeps
// its tokens.
func TestReplicaTakeTokens(t *testing.T) {
	ctx := context.Background()
	dsn := freshDSN(t)
	var reps []*postgres.Replicas
	for range 2 {
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		reps = append(reps, postgres.NewReplicas(s))
	}
	const per, burst = 0.01, 3 // one token in 100 s: none comes back during the test
	for i := range burst {
		if d, err := reps[i%2].TakeTokens(ctx, []string{"user:u", "key:k1"}, per, burst); err != nil || d != 0 {
			t.Fatalf("take %d of a burst of %d = %v, %v; want granted", i+1, burst, d, err)
		}
	}
	d, err := reps[1].TakeTokens(ctx, []string{"user:u", "key:k1"}, per, burst)
	if err != nil || d < 90*time.Second || d > 100*time.Second {
		t.Fatalf("take past the burst = %v, %v; want refused, about 100 s to wait", d, err)
	}
	// The user's bucket is empty: a second key is refused too, and its
	// own bucket is not charged.
	if d, err := reps[0].TakeTokens(ctx, []string{"user:u", "key:k2"}, per, burst); err != nil || d == 0 {
		t.Fatalf("another key of the same user = %v, %v; want refused", d, err)
	}
	for i := range burst {
		if d, err := reps[i%2].TakeTokens(ctx, []string{"user:v", "key:k2"}, per, burst); err != nil || d != 0 {
			t.Fatalf("key k2 for another user, take %d = %v, %v; want its whole burst", i+1, d, err)
		}
	}
}

// BenchmarkTakeTokens is the shared rate limit's cost per request: one
// statement, one round trip to a local PostgreSQL.
func BenchmarkTakeTokens(b *testing.B) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, freshDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := postgres.NewReplicas(s)
	names := []string{"user:u", "key:k"}
	for b.Loop() {
		if _, err := r.TakeTokens(ctx, names, 1e9, 1e9); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReplicaUserSlots: one user's slots are counted on every live
// replica together; a released slot is free again; a gone replica's
// slots do not count; a restart, and the sweep, give back what a replica
// no longer holds.
func TestReplicaUserSlots(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, freshDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := postgres.NewReplicas(s)
	const gone, cap = 10 * time.Second, 2
	for _, id := range []string{"sa", "sb"} {
		if err := r.Heartbeat(ctx, id, "", true); err != nil {
			t.Fatal(err)
		}
	}
	take := func(me, id string, want bool) {
		t.Helper()
		if ok, err := r.TakeUserSlot(ctx, me, "u", id, cap, gone); err != nil || ok != want {
			t.Fatalf("%s takes %s = %v, %v; want %v", me, id, ok, err, want)
		}
	}
	take("sa", "c1", true)
	take("sb", "c2", true)
	take("sa", "c3", false) // the user's two slots are taken, one on each
	take("sb", "c3", false)
	if ok, err := r.TakeUserSlot(ctx, "sa", "v", "v1", cap, gone); err != nil || !ok {
		t.Fatalf("another user's slot = %v, %v", ok, err)
	}
	if err := r.ReleaseUserSlot(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	take("sa", "c3", true)
	// sb is gone: its slot no longer counts.
	if _, err := s.SQL().ExecContext(ctx, `UPDATE replicas SET heartbeat = now() - interval '1 hour' WHERE id = 'sb'`); err != nil {
		t.Fatal(err)
	}
	take("sa", "c4", true)
	take("sa", "c5", false)
	// The sweep keeps what sa holds (c3) and gives back the rest (c4).
	if err := r.KeepUserSlots(ctx, "sa", []string{"c3", "v1"}); err != nil {
		t.Fatal(err)
	}
	take("sa", "c5", true)
	// sb starts again on its data directory: its old slot goes.
	if err := r.Heartbeat(ctx, "sb", "", true); err != nil {
		t.Fatal(err)
	}
	take("sb", "c6", false) // c3 and c5 on sa
	if err := r.ReleaseUserSlot(ctx, "c5"); err != nil {
		t.Fatal(err)
	}
	take("sb", "c6", true) // c2 was given back at sb's start
}

// BenchmarkUserSlot is what the per-user cap across replicas adds to a
// cell: a slot taken and given back.
func BenchmarkUserSlot(b *testing.B) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, freshDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := postgres.NewReplicas(s)
	if err := r.Heartbeat(ctx, "me", "", true); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if ok, err := r.TakeUserSlot(ctx, "me", "u", "cell", 4, time.Minute); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := r.ReleaseUserSlot(ctx, "cell"); err != nil {
			b.Fatal(err)
		}
	}
}

// Gone names the replicas of this store whose heartbeat is stale, not
// live ones and not ids it has no row for (another kiln's); NotedSandboxes
// gives the sandboxes noted for active sessions only.
func TestReplicaGoneAndNotedSandboxes(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, freshDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := postgres.NewReplicas(s)
	for _, id := range []string{"stale", "live"} {
		if err := r.Heartbeat(ctx, id, "", true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SQL().ExecContext(ctx, `UPDATE replicas SET heartbeat = now() - interval '1 minute' WHERE id = 'stale'`); err != nil {
		t.Fatal(err)
	}
	gone, err := r.Gone(ctx, []string{"live", "stale", "elsewhere"}, 30*time.Second)
	if err != nil || !slices.Equal(gone, []string{"stale"}) {
		t.Errorf("Gone = %v, %v; want [stale]", gone, err)
	}
	u := store.User{Name: "u"}
	if err := s.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		sess := store.Session{UserID: u.ID, Languages: []string{"python"}, IdleTTL: time.Hour}
		if err := s.CreateSession(ctx, &sess); err != nil {
			t.Fatal(err)
		}
		if err := r.Hold(ctx, "live", sess.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sess.ID)
	}
	if err := r.NoteSandbox(ctx, "live", ids[0], `{"ID":"a"}`); err != nil {
		t.Fatal(err)
	}
	if err := r.NoteSandbox(ctx, "stale", ids[1], `{"ID":"not-the-holder"}`); err != nil {
		t.Fatal(err)
	}
	if err := r.NoteSandbox(ctx, "live", ids[2], `{"ID":"ended"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SQL().ExecContext(ctx, `UPDATE sessions SET status = 'ended' WHERE id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	noted, err := r.NotedSandboxes(ctx)
	if err != nil || !slices.Equal(noted, []string{`{"ID":"a"}`}) {
		t.Errorf("NotedSandboxes = %v, %v; want only the held, active session's", noted, err)
	}
	// A replica that leaves is gone at once; its next heartbeat is back.
	if err := r.Leave(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	if gone, err := r.Gone(ctx, []string{"live"}, time.Hour); err != nil || !slices.Equal(gone, []string{"live"}) {
		t.Errorf("Gone after Leave = %v, %v; want [live]", gone, err)
	}
	if err := r.Heartbeat(ctx, "live", "", false); err != nil {
		t.Fatal(err)
	}
	if gone, err := r.Gone(ctx, []string{"live"}, time.Hour); err != nil || len(gone) != 0 {
		t.Errorf("Gone after a heartbeat = %v, %v; want none", gone, err)
	}
}
