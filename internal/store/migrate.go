package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the dialect's migrations in order: for each version the
// file NNNN_name.<dialect>.sql if there is one, else NNNN_name.sql.
func migrations(dialect string) ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	generic, variant := map[int]migration{}, map[int]migration{}
	for _, p := range names {
		base := strings.TrimSuffix(path.Base(p), ".sql")
		num, rest, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name is not NNNN_name.sql", p)
		}
		name, d, isVariant := strings.Cut(rest, ".")
		into := generic
		if isVariant {
			if d != dialect && dialect != "" {
				continue
			}
			into = variant
		}
		if _, dup := into[v]; dup && (dialect != "" || !isVariant) {
			return nil, fmt.Errorf("migration %s: version %d used twice", p, v)
		}
		b, err := migrationFiles.ReadFile(p)
		if err != nil {
			return nil, err
		}
		into[v] = migration{version: v, name: name, sql: string(b)}
	}
	byVersion := generic
	for v, m := range variant {
		byVersion[v] = m // the dialect's variant wins
	}
	var out []migration
	for _, m := range byVersion {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration version %d missing", i+1)
		}
	}
	return out, nil
}

// LatestVersion is the schema version the embedded migrations lead to.
func LatestVersion() int {
	ms, err := migrations("")
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate applies the migrations not yet recorded in schema_migrations, all
// in one transaction. Running it again is a no-op; two processes running it
// at once apply each migration once.
func (s *DB) Migrate(ctx context.Context) error {
	ms, err := migrations(s.d.Name)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if s.d.LockMigrations != "" {
			if _, err := tx.ExecContext(ctx, s.d.LockMigrations); err != nil {
				return fmt.Errorf("lock for migrations: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version BIGINT PRIMARY KEY,
			name    TEXT NOT NULL,
			applied BIGINT NOT NULL
		)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var have int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if have > len(ms) {
			return fmt.Errorf("database schema version %d is newer than this kiln (%d)", have, len(ms))
		}
		for _, m := range ms[have:] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %d_%s: %w", m.version, m.name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied) VALUES ($1, $2, $3)`,
				m.version, m.name, nanos(now())); err != nil {
				return fmt.Errorf("record migration %d: %w", m.version, err)
			}
		}
		return nil
	})
}

// Version returns the highest migration recorded in the database.
func (s *DB) Version(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}
