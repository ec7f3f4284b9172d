package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
)

func sp(s string) *string { return &s }

// TestBatchThroughTheAPI: a streamed batch gives every item's verdict and
// the summary; the batch and its results can be read back, only by their
// owner; a rerun with the cache is marked cached; a bad item is a 400
// naming it.
func TestBatchThroughTheAPI(t *testing.T) {
	e := newEnv(t, options{})
	ctx := ctxT(t)
	c := e.user("ada")
	req := client.BatchRequest{Cache: true, Items: []client.BatchItem{
		{ID: "ok", Language: "python", Code: "print(input())", Stdin: "7", Check: client.BatchCheck{Stdout: sp("7\n")}},
		{ID: "wrong", Language: "python", Code: "print(8)", Check: client.BatchCheck{Stdout: sp("7"), Trim: true}},
		{ID: "test", Language: "javascript", Code: "function sq(x) { return x * x }", Check: client.BatchCheck{Test: "require('assert').strictEqual(sq(3), 9)"}},
		{ID: "slow", Language: "python", Code: "while True: pass", Limits: client.Limits{TimeoutMS: 1000}, Check: client.BatchCheck{}},
	}}
	want := map[string]string{"ok": "", "wrong": client.ReasonWrongAnswer, "test": "", "slow": client.ReasonTimeout}
	got := map[string]client.BatchItemResult{}
	b, err := c.BatchStream(ctx, req, func(r client.BatchItemResult) { got[r.ID] = r })
	if err != nil {
		t.Fatal(err)
	}
	for id, reason := range want {
		r, ok := got[id]
		if !ok || r.Reason != reason || r.Passed != (reason == "") || r.Cached {
			t.Errorf("%s: %+v, want reason %q, not cached", id, r, reason)
		}
	}
	if b.Status != "done" || b.Total != 4 || b.Passed != 2 || b.Failed != 2 || b.Reasons[client.ReasonTimeout] != 1 || b.Finished == nil {
		t.Errorf("summary = %+v", b)
	}
	again, err := c.Batch(ctx, b.ID)
	if err != nil || again.Done != 4 {
		t.Errorf("GET the batch: %+v, %v", again, err)
	}
	page, err := c.BatchItems(ctx, b.ID, 3, "")
	if err != nil || len(page.Items) != 3 || page.NextCursor == "" || page.Items[1].ID != "wrong" {
		t.Fatalf("first page of items: %+v, %v", page, err)
	}
	rest, err := c.BatchItems(ctx, b.ID, 3, page.NextCursor)
	if err != nil || len(rest.Items) != 1 || rest.Items[0].ID != "slow" {
		t.Errorf("second page: %+v, %v", rest, err)
	}
	_, err = e.user("bob").Batch(ctx, b.ID)
	wantProblem(t, "another user's batch", err, http.StatusNotFound, "not_found")

	// The same batch again, with the cache: every item is cached, same verdicts.
	started, err := c.CreateBatch(ctx, req)
	if err != nil || started.Status != "running" || started.Total != 4 {
		t.Fatalf("CreateBatch: %+v, %v", started, err)
	}
	b2, err := c.BatchStream(ctx, req, func(r client.BatchItemResult) {
		if !r.Cached || r.Reason != want[r.ID] {
			t.Errorf("rerun %s: cached=%v reason=%q, want cached, %q", r.ID, r.Cached, r.Reason, want[r.ID])
		}
	})
	if err != nil || b2.Passed != 2 {
		t.Errorf("rerun: %+v, %v", b2, err)
	}

	// One-shot runs: opt-in cache, marked.
	for i, wantCached := range []bool{false, true} {
		res, err := c.Run(ctx, client.RunRequest{Language: "python", Code: "print('once')", Cache: true})
		if err != nil || res.Cached != wantCached || res.Result.Stdout != "once\n" {
			t.Errorf("run %d with the cache: cached=%v err=%v, want cached=%v", i, res != nil && res.Cached, err, wantCached)
		}
	}

	_, err = c.CreateBatch(ctx, client.BatchRequest{Items: []client.BatchItem{{Language: "python", Code: "1"}, {Language: "nope", Code: "1"}}})
	p := wantProblem(t, "an unknown language", err, http.StatusBadRequest, "invalid")
	if p != nil && !strings.Contains(p.Detail, "item 1") {
		t.Errorf("detail %q does not name the item", p.Detail)
	}
	_, err = c.CreateBatch(ctx, client.BatchRequest{})
	wantProblem(t, "no items", err, http.StatusBadRequest, "invalid")
}
