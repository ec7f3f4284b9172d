package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/kiln-dev/kiln/internal/store"
)

func testBatches(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, other := newUser(t, s, "judge"), newUser(t, s, "other")
	items := make([]string, 120)
	for i := range items {
		items[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	b := store.Batch{UserID: u.ID, Cache: true, Created: at(1)}
	must(t, "create batch", s.CreateBatch(ctx, &b, items))
	if b.ID == "" || b.Total != 120 || b.Status != store.BatchRunning {
		t.Fatalf("created batch = %+v", b)
	}
	_, err := s.Batch(ctx, other.ID, b.ID)
	wantErr(t, "another user's batch", err, store.ErrNotFound)
	wantErr(t, "finish another user's item", s.FinishBatchItem(ctx, other.ID, store.BatchItem{BatchID: b.ID, Index: 0}), store.ErrNotFound)
	wantErr(t, "finish an item out of range", s.FinishBatchItem(ctx, u.ID, store.BatchItem{BatchID: b.ID, Index: 120}), store.ErrNotFound)

	for i := range 30 {
		it := store.BatchItem{BatchID: b.ID, Index: i * 2, Passed: i%3 != 0, Result: fmt.Sprintf(`{"r":%d}`, i), Finished: at(10 + i)}
		if !it.Passed {
			it.Reason = "wrong_answer"
		}
		must(t, "finish item", s.FinishBatchItem(ctx, u.ID, it))
	}
	got, err := s.Batch(ctx, u.ID, b.ID)
	must(t, "batch", err)
	if got.Done != 30 || got.Passed != 20 || got.Reasons["wrong_answer"] != 10 || !got.Cache {
		t.Errorf("counts = done %d passed %d reasons %v cache %v, want 30, 20, wrong_answer 10, true", got.Done, got.Passed, got.Reasons, got.Cache)
	}
	pending, err := s.PendingBatchItems(ctx, u.ID, b.ID)
	must(t, "pending", err)
	if len(pending) != 90 || pending[0].Index != 1 || pending[0].Item != `{"n":1}` {
		t.Errorf("pending = %d items, first %+v; want 90 from index 1", len(pending), pending[0])
	}
	done := drain(t, func(p store.Page) ([]store.BatchItem, string, error) {
		return s.BatchItems(ctx, u.ID, b.ID, true, p)
	}, 7, nil)
	if len(done) != 30 || done[29].Index != 58 || done[1].Result != `{"r":1}` {
		t.Errorf("done items: %d, last index %d", len(done), done[len(done)-1].Index)
	}
	all := drain(t, func(p store.Page) ([]store.BatchItem, string, error) {
		return s.BatchItems(ctx, u.ID, b.ID, false, p)
	}, 50, nil)
	for i, it := range all {
		if it.Index != i {
			t.Fatalf("item %d has index %d: the order is lost", i, it.Index)
		}
	}
	_, _, err = s.BatchItems(ctx, other.ID, b.ID, false, store.Page{})
	wantErr(t, "another user's items", err, store.ErrNotFound)

	running, err := s.RunningBatches(ctx)
	must(t, "running", err)
	if len(running) != 1 || running[0].ID != b.ID {
		t.Errorf("running batches = %+v, want the one", running)
	}
	wantErr(t, "finish another user's batch", s.FinishBatch(ctx, other.ID, b.ID, at(100)), store.ErrNotFound)
	must(t, "finish batch", s.FinishBatch(ctx, u.ID, b.ID, at(100)))
	if running, _ := s.RunningBatches(ctx); len(running) != 0 {
		t.Errorf("a finished batch is still running: %+v", running)
	}
}

func testRunCache(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, other := newUser(t, s, "cache"), newUser(t, s, "other")
	must(t, "put", s.PutCachedRun(ctx, u.ID, "k1", "r1", at(1), 3))
	if got, err := s.CachedRun(ctx, u.ID, "k1"); err != nil || got != "r1" {
		t.Errorf("cached = %q, %v; want r1", got, err)
	}
	_, err := s.CachedRun(ctx, other.ID, "k1")
	wantErr(t, "another user's cache", err, store.ErrNotFound)
	must(t, "replace", s.PutCachedRun(ctx, u.ID, "k1", "r1b", at(2), 3))
	for i := 2; i <= 4; i++ {
		must(t, "put", s.PutCachedRun(ctx, u.ID, fmt.Sprintf("k%d", i), "r", at(2+i), 3))
	}
	_, err = s.CachedRun(ctx, u.ID, "k1")
	wantErr(t, "the oldest entry past the bound", err, store.ErrNotFound)
	for _, k := range []string{"k2", "k3", "k4"} {
		if _, err := s.CachedRun(ctx, u.ID, k); err != nil {
			t.Errorf("entry %s: %v", k, err)
		}
	}
}
