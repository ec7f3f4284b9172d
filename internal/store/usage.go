package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// AddCPU adds d to the user's CPU time for the UTC day (YYYY-MM-DD). The
// upsert is one statement, so concurrent cells of a user add up.
func (s *DB) AddCPU(ctx context.Context, userID, day string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO cpu_usage (user_id, day, cpu) VALUES ($1, $2, $3)
		ON CONFLICT (user_id, day) DO UPDATE SET cpu = cpu_usage.cpu + excluded.cpu`, userID, day, int64(d))
	if err != nil {
		return fmt.Errorf("add cpu usage: %w", err)
	}
	return nil
}

// CPU returns the user's CPU time for the UTC day; 0 when none was used.
func (s *DB) CPU(ctx context.Context, userID, day string) (time.Duration, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT cpu FROM cpu_usage WHERE user_id = $1 AND day = $2`, userID, day).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cpu usage: %w", err)
	}
	return time.Duration(n), nil
}
