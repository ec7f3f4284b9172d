package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/batch"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// BatchRequest is a batch of items to run and judge, each in a fresh
// sandbox through the one-shot path.
type BatchRequest struct {
	Items []batch.Item
	Cache bool // items may take their result from the user's run cache
	// Network is every item's network policy, and Packages (with
	// PackageManager) the packages of every item that names none.
	Network        *kiln.NetworkPolicy
	Packages       []string
	PackageManager string
}

// BatchItemResult is one judged item.
type BatchItemResult struct {
	Index int    `json:"index"`
	ID    string `json:"id,omitempty"`
	batch.Verdict
	Result kiln.CellResult `json:"result"` // outputs cut to batch.MaxOutputBytes
	Cached bool            `json:"cached,omitempty"`
}

// BatchSummary is a batch's state and counts.
type BatchSummary = store.Batch

// storedItem is an item as the store keeps it: with its limits, which
// the item's wire form leaves to the API.
type storedItem struct {
	batch.Item
	Limits kiln.Limits `json:"limits"`
}

// batchRunner holds the batches running in this process.
type batchRunner struct {
	ctx    context.Context // cancelled by Close: items left pending resume at the next start
	cancel context.CancelFunc
	mu     sync.Mutex
	subs   map[string][]chan BatchItemResult // watchers by batch id
}

func (b *batchRunner) init() {
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.subs = map[string][]chan BatchItemResult{}
}

// BatchWatch receives a batch's results as its items finish; Results
// is closed when the batch is done (or the service stops).
type BatchWatch struct {
	Results <-chan BatchItemResult
	// Stop ends the watch (a client that left): results are no longer
	// kept for it.
	Stop func()
}

// retryRunKinds are errors of the moment: the item waits and tries again
// (the user's queue is full, or their CPU budget is spent until it renews).
var retryRunKinds = map[kiln.Kind]bool{kiln.QuotaExceeded: true, kiln.Unavailable: true, kiln.RateLimited: true}

// CreateBatch checks every item, stores the batch and starts it. The
// watch gets every item's result as it finishes, the batch going on when
// nobody watches.
func (s *Service) CreateBatch(ctx context.Context, u kiln.User, r BatchRequest) (BatchSummary, BatchWatch, error) {
	if len(r.Items) == 0 {
		return BatchSummary{}, BatchWatch{}, kiln.Errorf(kiln.Invalid, "the batch has no items")
	}
	if len(r.Items) > batch.MaxItems {
		return BatchSummary{}, BatchWatch{}, kiln.Errorf(kiln.TooLarge, "the batch has %d items; the limit is %d", len(r.Items), batch.MaxItems)
	}
	raw := make([]string, len(r.Items))
	for i, it := range r.Items {
		it.Network = r.Network
		if len(it.Packages) == 0 {
			it.Packages, it.PackageManager = r.Packages, r.PackageManager
		}
		if err := s.checkItem(u, i, it); err != nil {
			return BatchSummary{}, BatchWatch{}, err
		}
		b, err := json.Marshal(storedItem{Item: it, Limits: it.Limits})
		if err != nil {
			return BatchSummary{}, BatchWatch{}, err
		}
		raw[i] = string(b)
	}
	b := store.Batch{UserID: u.ID, Cache: r.Cache}
	if err := s.store.CreateBatch(ctx, &b, raw); err != nil {
		return BatchSummary{}, BatchWatch{}, err
	}
	s.audit(ctx, store.AuditEntry{UserID: u.ID, Action: "batch.create", Outcome: "ok",
		Detail: jsonDetail(map[string]any{"batch": b.ID, "items": len(raw), "cache": r.Cache})})
	w := s.watch(b.ID, len(raw))
	s.startBatch(u, b)
	b.Reasons = map[string]int{}
	return b, w, nil
}

// checkItem refuses an item that could never run, before anything does.
func (s *Service) checkItem(u kiln.User, i int, it batch.Item) error {
	if err := batch.Validate(i, it); err != nil {
		return err
	}
	if _, err := engine.PrepareRun(itemRun(it), s.cellBounds()); err != nil {
		return kiln.Errorf(kiln.KindOf(err), "item %d: %s", i, kiln.Message(err))
	}
	if _, err := s.capLimits(u, it.Limits); err != nil {
		return kiln.Errorf(kiln.KindOf(err), "item %d: %s", i, kiln.Message(err))
	}
	if _, _, _, err := s.runNetwork(u, itemRun(it)); err != nil {
		return kiln.Errorf(kiln.KindOf(err), "item %d: %s", i, kiln.Message(err))
	}
	return nil
}

func itemRun(it batch.Item) RunRequest {
	p := batch.ProgramOf(it)
	r := RunRequest{Language: it.Language, Code: p.Code, Args: it.Args, Stdin: []byte(it.Stdin), Limits: it.Limits, Name: p.Name, BuildOptions: it.BuildOptions,
		Test: p.Test, Packages: it.Packages, PackageManager: it.PackageManager}
	if it.Network != nil {
		r.Network = *it.Network
	}
	for _, f := range p.Files {
		r.Files = append(r.Files, File{Path: f.Path, Data: f.Content, Mode: f.Mode})
	}
	return r
}

// Batch returns the user's batch with its counts.
func (s *Service) Batch(ctx context.Context, u kiln.User, id string) (BatchSummary, error) {
	return s.store.Batch(ctx, u.ID, id)
}

// BatchItems pages through the results of the user's batch, in item
// order; items still pending are left out.
func (s *Service) BatchItems(ctx context.Context, u kiln.User, id string, p store.Page) ([]BatchItemResult, string, error) {
	items, next, err := s.store.BatchItems(ctx, u.ID, id, true, p)
	if err != nil {
		return nil, "", err
	}
	out := make([]BatchItemResult, 0, len(items))
	for _, it := range items {
		var r BatchItemResult
		if err := json.Unmarshal([]byte(it.Result), &r); err != nil {
			return nil, "", fmt.Errorf("batch %s item %d: %w", id, it.Index, err)
		}
		out = append(out, r)
	}
	return out, next, nil
}

// watch subscribes to a batch's results; the channel holds every item,
// so publishing never waits for a slow reader.
func (s *Service) watch(id string, n int) BatchWatch {
	ch := make(chan BatchItemResult, n)
	s.batches.mu.Lock()
	s.batches.subs[id] = append(s.batches.subs[id], ch)
	s.batches.mu.Unlock()
	return BatchWatch{Results: ch, Stop: func() { s.unwatch(id, ch) }}
}

func (s *Service) unwatch(id string, ch chan BatchItemResult) {
	s.batches.mu.Lock()
	defer s.batches.mu.Unlock()
	subs := s.batches.subs[id]
	if i := slices.Index(subs, ch); i >= 0 {
		s.batches.subs[id] = slices.Delete(subs, i, i+1)
		close(ch)
	}
}

func (s *Service) publish(id string, r BatchItemResult) {
	s.batches.mu.Lock()
	defer s.batches.mu.Unlock()
	for _, ch := range s.batches.subs[id] {
		select {
		case ch <- r:
		default: // cannot happen: the buffer holds every item
		}
	}
}

func (s *Service) endWatches(id string) {
	s.batches.mu.Lock()
	defer s.batches.mu.Unlock()
	for _, ch := range s.batches.subs[id] {
		close(ch)
	}
	delete(s.batches.subs, id)
}

// resumeBatches starts again the batches a previous run left running:
// their items without a result run now (recovery at start).
func (s *Service) resumeBatches(ctx context.Context) error {
	running, err := s.store.RunningBatches(ctx)
	if err != nil {
		return err
	}
	for _, b := range running {
		u, err := s.store.User(ctx, b.UserID)
		if err != nil {
			return err
		}
		s.log.Info("resuming batch", "batch", b.ID, "user", b.UserID)
		s.startBatch(u, b)
	}
	return nil
}

// startBatch runs the batch's pending items in the background, as many
// at once as one user may run (the queue shares them fairly with other
// users' work), and marks it done when all have a result.
func (s *Service) startBatch(u kiln.User, b store.Batch) {
	if !s.claimBatch(b.ID) {
		return // another replica runs it (replicas.go)
	}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		defer s.endWatches(b.ID)
		ctx := s.batches.ctx
		// Passes until no item lacks a result: an item whose result the
		// store did not take (an outage) runs again after a pause.
		for pass := 0; ; pass++ {
			pending, err := s.store.PendingBatchItems(ctx, u.ID, b.ID)
			if ctx.Err() != nil {
				return // stopping: the rest resumes at the next start
			}
			if err == nil && len(pending) == 0 {
				break
			}
			if err != nil {
				s.log.Error("batch items", "batch", b.ID, "err", err)
			}
			if err != nil || pass > 0 {
				select {
				case <-time.After(5 * time.Second):
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				continue
			}
			s.runPending(ctx, u, b, pending)
			if ctx.Err() != nil {
				return
			}
		}
		if err := s.store.FinishBatch(context.Background(), u.ID, b.ID, time.Now()); err != nil {
			s.log.Error("finish batch", "batch", b.ID, "err", err)
		}
		s.audit(ctx, store.AuditEntry{UserID: u.ID, Action: "batch.done", Outcome: "ok", Detail: jsonDetail(map[string]any{"batch": b.ID})})
	}()
}

// runPending runs the items, UserConcurrency at once.
func (s *Service) runPending(ctx context.Context, u kiln.User, b store.Batch, pending []store.BatchItem) {
	next := make(chan store.BatchItem)
	var wg sync.WaitGroup
	for range min(s.cfg.UserConcurrency, len(pending)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				s.runItem(ctx, u, b, it)
			}
		}()
	}
feed:
	for _, it := range pending {
		select {
		case next <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
}

// runItem runs and judges one item and records its result. An item cut
// short by the service stopping is left pending.
func (s *Service) runItem(ctx context.Context, u kiln.User, b store.Batch, rec store.BatchItem) {
	var it storedItem
	var res RunResult
	err := json.Unmarshal([]byte(rec.Item), &it)
	if err != nil {
		// Not an item (the store's copy is damaged): it fails rather than
		// being tried again for ever.
		s.log.Error("batch item", "batch", b.ID, "index", rec.Index, "err", err)
		err = kiln.Errorf(kiln.Internal, "the stored item could not be read")
	} else {
		it.Item.Limits = it.Limits
		res, err = s.runWithRetry(ctx, u, itemRun(it.Item), b.Cache)
	}
	if ctx.Err() != nil {
		return
	}
	out := BatchItemResult{Index: rec.Index, ID: it.ID}
	if err != nil {
		out.Verdict = batch.Verdict{Reason: batch.Rejected, Detail: kiln.Message(err)}
	} else {
		out.Verdict = batch.Judge(it.Check, res.Result)
		out.Result, out.Cached = batch.Trim(res.Result), res.Cached
	}
	raw, err := json.Marshal(out)
	if err != nil {
		s.log.Error("batch result", "batch", b.ID, "index", rec.Index, "err", err)
		return
	}
	rec.Done, rec.Passed, rec.Reason, rec.Result = true, out.Passed, string(out.Reason), string(raw)
	if err := s.store.FinishBatchItem(context.WithoutCancel(ctx), u.ID, rec); err != nil {
		s.log.Error("record batch item", "batch", b.ID, "index", rec.Index, "err", err)
		return
	}
	s.publish(b.ID, out)
}

// runWithRetry runs one item, waiting out errors of the moment (a full
// queue, a spent budget) with a backoff of up to 5 s.
func (s *Service) runWithRetry(ctx context.Context, u kiln.User, r RunRequest, cache bool) (RunResult, error) {
	wait := 100 * time.Millisecond
	for {
		var res RunResult
		var err error
		if cache {
			res, err = s.RunCached(ctx, u, r)
		} else {
			res, err = s.Run(ctx, u, r)
		}
		if err == nil || !retryRunKinds[kiln.KindOf(err)] || errors.Is(err, context.Canceled) {
			return res, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return RunResult{}, ctx.Err()
		}
		wait = min(2*wait, 5*time.Second)
	}
}
