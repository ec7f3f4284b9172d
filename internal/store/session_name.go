package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// SetSessionMetadata sets one metadata pair of the user's session, or
// removes it when value is empty, in both the session's metadata and the
// table ListSessions filters on; ErrNotFound as Session. The web
// notebook's rename sets "name" this way.
func (s *DB) SetSessionMetadata(ctx context.Context, userID, id, key, value string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var raw string
		if err := tx.QueryRowContext(ctx, `SELECT metadata FROM sessions WHERE id = $1 AND user_id = $2`, id, userID).Scan(&raw); err != nil {
			return one(err, "set session metadata")
		}
		md := map[string]string{}
		if err := json.Unmarshal([]byte(raw), &md); err != nil {
			return fmt.Errorf("session %s metadata: %w", id, err)
		}
		if value == "" {
			delete(md, key)
		} else {
			md[key] = value
		}
		b, err := toJSON(md)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET metadata = $3 WHERE id = $1 AND user_id = $2`, id, userID, b); err != nil {
			return fmt.Errorf("set session metadata: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM session_metadata WHERE session_id = $1 AND name = $2`, id, key); err != nil {
			return fmt.Errorf("set session metadata: %w", err)
		}
		if value == "" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO session_metadata (session_id, name, value) VALUES ($1, $2, $3)`, id, key, value); err != nil {
			return fmt.Errorf("set session metadata: %w", err)
		}
		return nil
	})
}
