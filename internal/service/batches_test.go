package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/unboxed"
	"github.com/kiln-dev/kiln/internal/batch"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
	"github.com/kiln-dev/kiln/internal/store"
	"github.com/kiln-dev/kiln/internal/store/sqlite"
	"github.com/kiln-dev/kiln/internal/workspace"
)

func strp(s string) *string { return &s }

// collect reads a watch to its end.
func collectBatch(t *testing.T, w BatchWatch) map[int]BatchItemResult {
	t.Helper()
	got := map[int]BatchItemResult{}
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case r, ok := <-w.Results:
			if !ok {
				return got
			}
			got[r.Index] = r
		case <-timeout:
			t.Fatalf("the batch did not finish; %d results so far", len(got))
		}
	}
}

func TestBatchJudgesItems(t *testing.T) {
	ts := newTestService(t, Config{})
	u := ts.user(t, "judge", false)
	type want struct {
		passed bool
		reason batch.Reason
	}
	items := []batch.Item{
		{ID: "py-ok", Language: "python", Code: "print(6*7)", Check: batch.Check{Stdout: strp("42\n")}},
		{ID: "py-trim", Language: "python", Code: "print('42   ')\nprint()", Check: batch.Check{Stdout: strp("42"), Trim: true}},
		{ID: "py-wrong", Language: "python", Code: "print(41)", Check: batch.Check{Stdout: strp("42\n")}},
		{ID: "py-crash", Language: "python", Code: "1/0", Check: batch.Check{Stdout: strp("")}},
		{ID: "py-syntax", Language: "python", Code: "def f(:", Check: batch.Check{}},
		{ID: "py-test-ok", Language: "python", Code: "def add(a, b):\n    return a + b", Check: batch.Check{Test: "assert add(2, 3) == 5"}},
		{ID: "py-test-wrong", Language: "python", Code: "def add(a, b):\n    return a - b", Check: batch.Check{Test: "assert add(2, 3) == 5"}},
		{ID: "py-stdin", Language: "python", Code: "print(int(input()) * 2)", Stdin: "21\n", Check: batch.Check{Stdout: strp("42\n")}},
		{ID: "py-timeout", Language: "python", Code: "while True: pass", Limits: kiln.Limits{Timeout: time.Second}, Check: batch.Check{}},
		{ID: "js-ok", Language: "javascript", Code: "console.log(6*7)", Check: batch.Check{Stdout: strp("42\n")}},
		{ID: "js-test-ok", Language: "javascript", Code: "function add(a, b) { return a + b }", Check: batch.Check{Test: "const assert = require('assert');\nassert.strictEqual(add(2, 3), 5)"}},
		{ID: "js-test-wrong", Language: "javascript", Code: "function add(a, b) { return a * b }", Check: batch.Check{Test: "const assert = require('assert');\nassert.strictEqual(add(2, 3), 5)"}},
		{ID: "js-throw", Language: "javascript", Code: "null.x", Check: batch.Check{}},
	}
	wants := []want{{true, ""}, {true, ""}, {false, batch.WrongAnswer}, {false, batch.RuntimeError}, {false, batch.CompileError},
		{true, ""}, {false, batch.WrongAnswer}, {true, ""}, {false, batch.Timeout}, {true, ""}, {true, ""}, {false, batch.WrongAnswer}, {false, batch.RuntimeError}}
	sum, w, err := ts.CreateBatch(ctxT(t, time.Minute), u, BatchRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	got := collectBatch(t, w)
	for i, it := range items {
		r, ok := got[i]
		if !ok {
			t.Errorf("%s: no result", it.ID)
			continue
		}
		if r.ID != it.ID || r.Passed != wants[i].passed || r.Reason != wants[i].reason {
			t.Errorf("%s: got id %q passed=%v reason=%q (%s), want passed=%v reason=%q; stdout %q stderr %q",
				it.ID, r.ID, r.Passed, r.Reason, r.Detail, wants[i].passed, wants[i].reason, r.Result.Stdout, r.Result.Stderr)
		}
	}
	b, err := ts.Batch(context.Background(), u, sum.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != store.BatchDone || b.Done != len(items) || b.Passed != 6 {
		t.Errorf("summary = %+v, want done, %d items, 6 passed", b, len(items))
	}
	stored, _, err := ts.BatchItems(context.Background(), u, sum.ID, store.Page{})
	if err != nil || len(stored) != len(items) || stored[2].Reason != batch.WrongAnswer {
		t.Errorf("stored results: %d, %v", len(stored), err)
	}
	other := ts.user(t, "other", false)
	if _, err := ts.Batch(context.Background(), other, sum.ID); kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("another user's batch: %v, want not found", err)
	}
}

func TestBatchRefusesBadItems(t *testing.T) {
	ts := newTestService(t, Config{})
	u := ts.user(t, "judge", false)
	for _, tc := range []struct {
		items []batch.Item
		want  string
	}{
		{nil, "no items"},
		{make([]batch.Item, batch.MaxItems+1), fmt.Sprint(batch.MaxItems)},
		{[]batch.Item{{Language: "python", Code: "1"}, {Language: "cobol", Code: "x"}}, "item 1"},
		{[]batch.Item{{Language: "python", Code: "  "}}, "item 0: the program is empty"},
		{[]batch.Item{{Language: "php", Code: "<?php echo 1;", Check: batch.Check{Test: "x"}}}, "test program"},
	} {
		_, _, err := ts.CreateBatch(context.Background(), u, BatchRequest{Items: tc.items})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CreateBatch(%d items) = %v, want an error with %q", len(tc.items), err, tc.want)
		}
	}
}

func TestBatchCachedRerun(t *testing.T) {
	ts := newTestService(t, Config{})
	u := ts.user(t, "judge", false)
	items := []batch.Item{
		{Language: "python", Code: "print(1)", Check: batch.Check{Stdout: strp("1\n")}},
		{Language: "python", Code: "print(2)", Check: batch.Check{Stdout: strp("1\n")}},
	}
	for round, wantCached := range []bool{false, true} {
		_, w, err := ts.CreateBatch(ctxT(t, time.Minute), u, BatchRequest{Items: items, Cache: true})
		if err != nil {
			t.Fatal(err)
		}
		got := collectBatch(t, w)
		for i := range items {
			if got[i].Cached != wantCached || got[i].Passed != (i == 0) {
				t.Errorf("round %d item %d: cached=%v passed=%v, want cached=%v passed=%v", round, i, got[i].Cached, got[i].Passed, wantCached, i == 0)
			}
		}
	}
	// Another user's identical run is not served from this user's cache.
	other := ts.user(t, "other", false)
	res, err := ts.RunCached(ctxT(t, time.Minute), other, RunRequest{Language: "python", Code: "print(1)"})
	if err != nil || res.Cached {
		t.Errorf("another user's run: cached=%v err=%v, want a fresh run", res.Cached, err)
	}
	// Other stdin is another key.
	res, err = ts.RunCached(ctxT(t, time.Minute), u, RunRequest{Language: "python", Code: "print(1)", Stdin: []byte("x")})
	if err != nil || res.Cached {
		t.Errorf("other stdin: cached=%v err=%v, want a fresh run", res.Cached, err)
	}
}

// TestBatchResumesAfterRestart stops the service while items wait on a
// gate file, then starts another service on the same store: the pending
// items run and the batch finishes, every item once.
func TestBatchResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate")
	dbPath := filepath.Join(dir, "kiln.db")
	open := func() (*Service, func()) {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		st, err := sqlite.Open(context.Background(), dbPath)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(context.Background(), Config{DataDir: dir, Workspaces: workspace.Plain, PoolSize: -1, UserConcurrency: 2},
			st, engine.New(unboxed.New(t.TempDir()), log), log)
		if err != nil {
			t.Fatal(err)
		}
		return svc, func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			svc.Close(ctx)
			st.Close()
		}
	}
	svc, closeSvc := open()
	u := kiln.User{Name: "judge"}
	if err := svc.store.CreateUser(context.Background(), &u); err != nil {
		t.Fatal(err)
	}
	var items []batch.Item
	for i := range 8 {
		code := fmt.Sprintf("print(%d)", i)
		if i >= 2 { // these wait until the gate opens, after the restart
			code = fmt.Sprintf("import os, time\nwhile not os.path.exists(%q): time.sleep(0.05)\nprint(%d)", gate, i)
		}
		items = append(items, batch.Item{Language: "python", Code: code, Check: batch.Check{Stdout: strp(fmt.Sprintf("%d\n", i))}})
	}
	sum, w, err := svc.CreateBatch(context.Background(), u, BatchRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-w.Results:
		case <-time.After(2 * time.Minute):
			t.Fatal("the first items did not finish")
		}
	}
	closeSvc()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	svc, closeSvc = open()
	defer closeSvc()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, err := svc.Batch(context.Background(), u, sum.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status == store.BatchDone {
			if b.Done != len(items) || b.Passed != len(items) {
				t.Errorf("after the restart: %d done, %d passed, reasons %v; want all %d passed", b.Done, b.Passed, b.Reasons, len(items))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch did not finish after the restart: %+v", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBatchWatchStops: a watch that stops (a client that left) is closed
// and keeps no results, and the batch still finishes.
func TestBatchWatchStops(t *testing.T) {
	ts := newTestService(t, Config{})
	u := ts.user(t, "judge", false)
	items := []batch.Item{{Language: "python", Code: "print(1)", Check: batch.Check{Stdout: strp("1\n")}}}
	sum, w, err := ts.CreateBatch(ctxT(t, time.Minute), u, BatchRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	w.Stop() // twice is harmless
	if _, open := <-w.Results; open {
		// A result may have been sent before Stop; the channel must close after it.
		if _, open := <-w.Results; open {
			t.Error("the stopped watch is still open")
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := ts.Batch(context.Background(), u, sum.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status == store.BatchDone {
			if b.Passed != 1 {
				t.Errorf("batch = %+v, want its item passed", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch did not finish without a watcher")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.batches.mu.Lock()
	left := len(ts.batches.subs)
	ts.batches.mu.Unlock()
	if left != 0 {
		t.Errorf("%d batches still have watchers", left)
	}
}

// TestRunCachedWithoutVersion: when the runtime's version cannot be told,
// a cached run runs uncached rather than failing (or, in a batch, waiting
// for ever).
func TestRunCachedWithoutVersion(t *testing.T) {
	ts := newTestService(t, Config{})
	u := ts.user(t, "judge", false)
	saved := probeVersion
	probeVersion = func(*lang.Language, context.Context) (string, error) { return "", errors.New("no version today") }
	runtimeVersions.Delete("bash")
	t.Cleanup(func() { probeVersion = saved; runtimeVersions.Delete("bash") })
	for range 2 {
		res, err := ts.RunCached(ctxT(t, time.Minute), u, RunRequest{Language: "bash", Code: "echo hi"})
		if err != nil || res.Cached || res.Result.Stdout != "hi\n" {
			t.Fatalf("RunCached = %+v, %v; want an uncached run", res, err)
		}
	}
}

// TestBatchWithADamagedItemFinishes: a stored item that cannot be read
// (found at start) fails as rejected instead of being tried for ever, and
// the batch's other items run.
func TestBatchWithADamagedItemFinishes(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u := kiln.User{Name: "judge"}
	if err := st.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	b := store.Batch{UserID: u.ID}
	good := `{"language":"python","code":"print(1)","check":{"stdout":"1\n"},"limits":{}}`
	if err := st.CreateBatch(ctx, &b, []string{"{damaged", good}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))
	svc, err := New(ctx, Config{DataDir: dir, Workspaces: workspace.Plain, PoolSize: -1}, st, engine.New(unboxed.New(t.TempDir()), log), log)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := svc.Batch(ctx, u, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == store.BatchDone {
			if got.Done != 2 || got.Passed != 1 || got.Reasons[string(batch.Rejected)] != 1 {
				t.Errorf("batch = %+v, want one rejected and one passed", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch did not finish: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCacheKeyCoversTest: a program run as its tests and the same program
// run as a program are different results, so they never share a cache
// entry.
func TestCacheKeyCoversTest(t *testing.T) {
	ts := newTestService(t, Config{})
	u := ts.user(t, "judge", false)
	r := RunRequest{Language: "bash", Code: "echo hi"}
	plain, err := ts.cacheKey(ctxT(t, time.Minute), u, r)
	if err != nil {
		t.Fatal(err)
	}
	r.Test = true
	tests, err := ts.cacheKey(ctxT(t, time.Minute), u, r)
	if err != nil {
		t.Fatal(err)
	}
	if plain == tests {
		t.Errorf("a run and the same run as tests share the cache key %s", plain)
	}
}
