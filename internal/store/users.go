package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

const userCols = `id, name, admin, created`

func scanUser(r scanner) (User, error) {
	var u User
	var created int64
	err := r.Scan(&u.ID, &u.Name, &u.Admin, &created)
	u.Created = fromNanos(created)
	return u, err
}

func (s *DB) CreateUser(ctx context.Context, u *User) error {
	if u.ID == "" {
		u.ID = NewID()
	}
	if u.Created.IsZero() {
		u.Created = now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO users (`+userCols+`) VALUES ($1, $2, $3, $4)`,
		u.ID, u.Name, u.Admin, nanos(u.Created))
	return s.conflict(err, "create user")
}

func (s *DB) User(ctx context.Context, id string) (User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE id = $1`, id))
	return u, one(err, "get user")
}

func (s *DB) UserByName(ctx context.Context, name string) (User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE name = $1`, name))
	return u, one(err, "get user")
}

func (s *DB) ListUsers(ctx context.Context, p Page) ([]User, string, error) {
	q := query{sql: `SELECT ` + userCols + ` FROM users WHERE 1 = 1`}
	n, err := q.page(p, "created", "id", false)
	if err != nil {
		return nil, "", err
	}
	us, err := list(ctx, s.db, q, scanUser)
	if err != nil {
		return nil, "", fmt.Errorf("list users: %w", err)
	}
	us, next := trim(us, n, func(u User) cursor { return cursor{N: nanos(u.Created), ID: u.ID} })
	return us, next, nil
}

const keyCols = `id, user_id, name, prefix, hash, created, last_used, revoked, expires, scope`

func scanKey(r scanner) (APIKey, error) {
	var k APIKey
	var created, used, revoked, expires int64
	err := r.Scan(&k.ID, &k.UserID, &k.Name, &k.Prefix, &k.Hash, &created, &used, &revoked, &expires, &k.Scope)
	k.Created, k.LastUsed, k.Revoked, k.Expires = fromNanos(created), fromNanos(used), fromNanos(revoked), fromNanos(expires)
	return k, err
}

func (s *DB) CreateAPIKey(ctx context.Context, k *APIKey) error {
	if len(k.Hash) != 64 {
		return fmt.Errorf("create api key: hash must be HashKey(key), got %d characters", len(k.Hash))
	}
	if k.ID == "" {
		k.ID = NewID()
	}
	if k.Created.IsZero() {
		k.Created = now()
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE id = $1`, k.UserID).Scan(&exists); err != nil {
			return one(err, "create api key")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (`+keyCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			k.ID, k.UserID, k.Name, k.Prefix, k.Hash, nanos(k.Created), nanos(k.LastUsed), nanos(k.Revoked), nanos(k.Expires), k.Scope)
		return s.conflict(err, "create api key")
	})
}

func (s *DB) APIKeyByHash(ctx context.Context, hash string) (APIKey, error) {
	k, err := scanKey(s.queryRow(ctx, nil, `SELECT `+keyCols+` FROM api_keys WHERE hash = $1 AND revoked = 0`, hash))
	return k, one(err, "get api key")
}

func (s *DB) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	res, err := s.exec(ctx, nil, `UPDATE api_keys SET last_used = $2 WHERE id = $1`, id, nanos(at))
	return affected(res, err, "touch api key")
}

func (s *DB) RevokeAPIKey(ctx context.Context, userID, id string, at time.Time) error {
	if at.IsZero() {
		at = now()
	}
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET revoked = $3 WHERE id = $1 AND user_id = $2 AND revoked = 0`,
		id, userID, nanos(at))
	return affected(res, err, "revoke api key")
}

func (s *DB) ListAPIKeys(ctx context.Context, userID string) ([]APIKey, error) {
	q := query{sql: `SELECT ` + keyCols + ` FROM api_keys WHERE user_id = $1 ORDER BY created, id`, args: []any{userID}}
	ks, err := list(ctx, s.db, q, scanKey)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return ks, nil
}
