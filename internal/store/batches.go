package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Batch statuses.
const (
	BatchRunning = "running"
	BatchDone    = "done"
)

// Batch is a batch of judged one-shot runs and its counts so far.
type Batch struct {
	ID       string
	UserID   string
	Status   string
	Cache    bool
	Total    int
	Created  time.Time
	Finished time.Time // zero while running

	Done    int            // items with a result
	Passed  int            // of those, passed
	Reasons map[string]int // failed items by reason
}

// BatchItem is one item of a batch; Item and Result are JSON the store
// keeps without reading.
type BatchItem struct {
	BatchID  string
	Index    int
	Item     string
	Done     bool
	Passed   bool
	Reason   string
	Result   string
	Finished time.Time
}

// CreateBatch stores b as running with its items (Index 0, 1, ... in
// order), in one transaction, filling in ID and Created when empty.
func (s *DB) CreateBatch(ctx context.Context, b *Batch, items []string) error {
	if b.ID == "" {
		b.ID = NewID()
	}
	if b.Created.IsZero() {
		b.Created = now()
	}
	b.Status, b.Total = BatchRunning, len(items)
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO batches (id, user_id, status, cache, total, created) VALUES ($1, $2, $3, $4, $5, $6)`,
			b.ID, b.UserID, b.Status, b.Cache, b.Total, nanos(b.Created))
		if err != nil {
			return s.conflict(err, "create batch")
		}
		st, err := tx.PrepareContext(ctx, `INSERT INTO batch_items (batch_id, idx, item) VALUES ($1, $2, $3)`)
		if err != nil {
			return fmt.Errorf("create batch items: %w", err)
		}
		defer st.Close()
		for i, it := range items {
			if _, err := st.ExecContext(ctx, b.ID, i, it); err != nil {
				return fmt.Errorf("create batch item %d: %w", i, err)
			}
		}
		return nil
	})
}

// Batch returns the user's batch with its counts, or ErrNotFound.
func (s *DB) Batch(ctx context.Context, userID, id string) (Batch, error) {
	var b Batch
	var created, finished int64
	err := s.db.QueryRowContext(ctx, `SELECT id, user_id, status, cache, total, created, finished FROM batches
		WHERE id = $1 AND user_id = $2`, id, userID).Scan(&b.ID, &b.UserID, &b.Status, &b.Cache, &b.Total, &created, &finished)
	if err := one(err, "batch"); err != nil {
		return Batch{}, err
	}
	b.Created, b.Finished = fromNanos(created), fromNanos(finished)
	b.Reasons = map[string]int{}
	rows, err := s.db.QueryContext(ctx, `SELECT passed, reason, COUNT(*) FROM batch_items
		WHERE batch_id = $1 AND done GROUP BY passed, reason`, id)
	if err != nil {
		return Batch{}, fmt.Errorf("batch counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var passed bool
		var reason string
		var n int
		if err := rows.Scan(&passed, &reason, &n); err != nil {
			return Batch{}, fmt.Errorf("batch counts: %w", err)
		}
		b.Done += n
		if passed {
			b.Passed += n
		} else {
			b.Reasons[reason] += n
		}
	}
	return b, rows.Err()
}

// FinishBatchItem records an item's result; ErrNotFound if the user has
// no such item. Recording it again replaces it (a resumed item).
func (s *DB) FinishBatchItem(ctx context.Context, userID string, it BatchItem) error {
	if it.Finished.IsZero() {
		it.Finished = now()
	}
	res, err := s.db.ExecContext(ctx, `UPDATE batch_items SET done = TRUE, passed = $1, reason = $2, result = $3, finished = $4
		WHERE batch_id = $5 AND idx = $6 AND batch_id IN (SELECT id FROM batches WHERE id = $5 AND user_id = $7)`,
		it.Passed, it.Reason, it.Result, nanos(it.Finished), it.BatchID, it.Index, userID)
	return affected(res, err, "finish batch item")
}

// FinishBatch marks the user's batch done; ErrNotFound if there is none.
func (s *DB) FinishBatch(ctx context.Context, userID, id string, at time.Time) error {
	if at.IsZero() {
		at = now()
	}
	res, err := s.db.ExecContext(ctx, `UPDATE batches SET status = $1, finished = $2 WHERE id = $3 AND user_id = $4`,
		BatchDone, nanos(at), id, userID)
	return affected(res, err, "finish batch")
}

// BatchItems pages through a batch's items in order, only those with a
// result when done is set; ErrNotFound if the user does not own it.
func (s *DB) BatchItems(ctx context.Context, userID, batchID string, done bool, p Page) ([]BatchItem, string, error) {
	if _, err := s.Batch(ctx, userID, batchID); err != nil {
		return nil, "", err
	}
	q := query{sql: `SELECT batch_id, idx, item, done, passed, reason, result, finished FROM batch_items WHERE batch_id = `}
	q.sql += q.arg(batchID)
	if done {
		q.sql += " AND done"
	}
	n, err := q.page(p, "idx", "", false)
	if err != nil {
		return nil, "", err
	}
	items, err := list(ctx, s.db, q, func(r scanner) (BatchItem, error) {
		var it BatchItem
		var finished int64
		err := r.Scan(&it.BatchID, &it.Index, &it.Item, &it.Done, &it.Passed, &it.Reason, &it.Result, &finished)
		it.Finished = fromNanos(finished)
		return it, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("batch items: %w", err)
	}
	out, next := trim(items, n, func(it BatchItem) cursor { return cursor{N: int64(it.Index)} })
	return out, next, nil
}

// PendingBatchItems returns the items of the user's batch that have no
// result yet, in order; ErrNotFound if the user does not own it.
func (s *DB) PendingBatchItems(ctx context.Context, userID, batchID string) ([]BatchItem, error) {
	if _, err := s.Batch(ctx, userID, batchID); err != nil {
		return nil, err
	}
	q := query{sql: `SELECT batch_id, idx, item FROM batch_items WHERE NOT done AND batch_id = `}
	q.sql += q.arg(batchID) + " ORDER BY idx"
	items, err := list(ctx, s.db, q, func(r scanner) (BatchItem, error) {
		var it BatchItem
		return it, r.Scan(&it.BatchID, &it.Index, &it.Item)
	})
	if err != nil {
		return nil, fmt.Errorf("pending batch items: %w", err)
	}
	return items, nil
}

// RunningBatches lists every running batch of every user, oldest first
// (for recovery at start).
func (s *DB) RunningBatches(ctx context.Context) ([]Batch, error) {
	q := query{sql: `SELECT id, user_id, status, cache, total, created, finished FROM batches WHERE status = `}
	q.sql += q.arg(BatchRunning) + " ORDER BY created, id"
	out, err := list(ctx, s.db, q, func(r scanner) (Batch, error) {
		var b Batch
		var created, finished int64
		err := r.Scan(&b.ID, &b.UserID, &b.Status, &b.Cache, &b.Total, &created, &finished)
		b.Created, b.Finished = fromNanos(created), fromNanos(finished)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("running batches: %w", err)
	}
	return out, nil
}

// CachedRun returns the user's cached result under key, or ErrNotFound.
func (s *DB) CachedRun(ctx context.Context, userID, key string) (string, error) {
	var res string
	err := s.db.QueryRowContext(ctx, `SELECT result FROM run_cache WHERE user_id = $1 AND key = $2`, userID, key).Scan(&res)
	return res, one(err, "cached run")
}

// PutCachedRun stores a result under key for the user (replacing one
// there) and keeps only the user's keep newest entries.
func (s *DB) PutCachedRun(ctx context.Context, userID, key, result string, at time.Time, keep int) error {
	if at.IsZero() {
		at = now()
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO run_cache (user_id, key, result, created) VALUES ($1, $2, $3, $4)
			ON CONFLICT (user_id, key) DO UPDATE SET result = excluded.result, created = excluded.created`,
			userID, key, result, nanos(at))
		if err != nil {
			return fmt.Errorf("put cached run: %w", err)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM run_cache WHERE user_id = $1 AND key NOT IN
			(SELECT key FROM run_cache WHERE user_id = $1 ORDER BY created DESC, key DESC LIMIT $2)`, userID, keep)
		if err != nil {
			return fmt.Errorf("bound the run cache: %w", err)
		}
		return nil
	})
}
