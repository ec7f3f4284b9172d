package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// Replicas is the bookkeeping of several kiln serve processes sharing
// one database (migration 0010): who is alive, and which replica holds
// each active session and running batch. Every claim is one transaction
// that locks the row it decides on (SELECT ... FOR UPDATE, SKIP LOCKED
// where a busy row is simply someone else's), and liveness is judged on
// the database's clock, so replicas on machines whose clocks differ agree.
type Replicas struct {
	db *sql.DB
}

// NewReplicas returns the replica bookkeeping over a PostgreSQL store.
func NewReplicas(s *store.DB) *Replicas { return &Replicas{db: s.SQL()} }

// ErrHeld says that another live replica holds the row.
var ErrHeld = errors.New("held by another live replica")

// secs is a bound as PostgreSQL interval seconds.
func secs(d time.Duration) float64 { return d.Seconds() }

// Heartbeat registers replica me (first call) or renews its heartbeat.
func (r *Replicas) Heartbeat(ctx context.Context, me, addr string, first bool) error {
	q := `INSERT INTO replicas (id, addr) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET heartbeat = now()`
	if first {
		q = `INSERT INTO replicas (id, addr) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET addr = $2, started = now(), heartbeat = now()`
	}
	if _, err := r.db.ExecContext(ctx, q, me, addr); err != nil {
		return fmt.Errorf("replica heartbeat: %w", err)
	}
	if first {
		// A restart runs none of the cells its previous run had slots for.
		if _, err := r.db.ExecContext(ctx, `DELETE FROM user_cells WHERE replica_id = $1`, me); err != nil {
			return fmt.Errorf("replica start: %w", err)
		}
	}
	return nil
}

// Leave marks me gone at once, as if its heartbeats had stopped long
// ago: a replica that stops lets the others take its sessions and
// batches over without waiting for the bound. Its next Heartbeat
// (a restart) makes it live again.
func (r *Replicas) Leave(ctx context.Context, me string) error {
	if _, err := r.db.ExecContext(ctx, `UPDATE replicas SET heartbeat = to_timestamp(0) WHERE id = $1`, me); err != nil {
		return fmt.Errorf("replica leave: %w", err)
	}
	return nil
}

// Hold records that me holds session id (one it has just made).
func (r *Replicas) Hold(ctx context.Context, me, id string) error {
	if _, err := r.db.ExecContext(ctx, `UPDATE sessions SET replica_id = $2 WHERE id = $1`, id, me); err != nil {
		return fmt.Errorf("hold session: %w", err)
	}
	return nil
}

// lockHolder locks a session or batch row in status and returns its
// holder. The liveness of the holder is read after the lock, in a
// statement of its own: a join in the locking statement would be
// re-checked against the replicas row as it was before the wait
// (PostgreSQL's EvalPlanQual), so two racing claims could both win.
func lockHolder(ctx context.Context, tx *sql.Tx, table, id, status string, skipLocked bool) (string, error) {
	q := fmt.Sprintf(`SELECT replica_id FROM %s WHERE id = $1 AND status = $2 FOR UPDATE`, table)
	if skipLocked {
		q += " SKIP LOCKED"
	}
	var holder string
	err := tx.QueryRowContext(ctx, q, id, status).Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("claim %s %s: %w", table, id, store.ErrNotFound)
	}
	return holder, err
}

// alive says whether replica id has heartbeaten within gone.
func alive(ctx context.Context, tx *sql.Tx, id string, gone time.Duration) (bool, error) {
	if id == "" {
		return false, nil
	}
	var ok bool
	err := tx.QueryRowContext(ctx, `SELECT heartbeat > now() - make_interval(secs => $2) FROM replicas WHERE id = $1`,
		id, secs(gone)).Scan(&ok)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return ok, err
}

// ClaimSession makes me the holder of active session id unless another
// live replica holds it: then it answers that replica's id and ErrHeld.
// A session held by a gone replica (or by none) is taken over here, by
// exactly one replica: the row lock orders racing claims, and the second
// sees the first as the live holder. store.ErrNotFound if the session is
// not active.
func (r *Replicas) ClaimSession(ctx context.Context, me, id string, gone time.Duration) (holder string, _ error) {
	return r.claim(ctx, "sessions", string(store.SessionActive), me, id, gone, false)
}

// ClaimBatch makes me the holder of running batch id unless another live
// replica holds it or is claiming it right now (SKIP LOCKED): false then.
func (r *Replicas) ClaimBatch(ctx context.Context, me, id string, gone time.Duration) (bool, error) {
	_, err := r.claim(ctx, "batches", "running", me, id, gone, true)
	if errors.Is(err, ErrHeld) || errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (r *Replicas) claim(ctx context.Context, table, status, me, id string, gone time.Duration, skipLocked bool) (holder string, err error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("claim: %w", err)
	}
	defer tx.Rollback()
	holder, err = lockHolder(ctx, tx, table, id, status, skipLocked)
	if err != nil {
		return "", err
	}
	if holder == me {
		return me, nil
	}
	live, err := alive(ctx, tx, holder, gone)
	if err != nil {
		return "", fmt.Errorf("claim %s %s: %w", table, id, err)
	}
	if live {
		return holder, ErrHeld
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE %s SET replica_id = $2 WHERE id = $1`, table), id, me); err != nil {
		return "", fmt.Errorf("claim %s %s: %w", table, id, err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("claim %s %s: %w", table, id, err)
	}
	return me, nil
}

// Held lists the active sessions me holds, or that no replica holds
// (made before replicas were recorded): those a replica resumes when
// it starts. The latter become me's.
func (r *Replicas) Held(ctx context.Context, me string) (map[string]bool, error) {
	rows, err := r.db.QueryContext(ctx, `UPDATE sessions SET replica_id = $1
		WHERE status = $2 AND replica_id IN ('', $1) RETURNING id`, me, string(store.SessionActive))
	if err != nil {
		return nil, fmt.Errorf("held sessions: %w", err)
	}
	defer rows.Close()
	held := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("held sessions: %w", err)
		}
		held[id] = true
	}
	return held, rows.Err()
}

// Reaped is a session ended by ReapIdle.
// Reaped is a session ReapIdle ended, with the sandbox last noted for it
// (NoteSandbox, Release; "" for none).
type Reaped struct{ ID, UserID, Sandbox string }

// ReapIdle ends, with reason, the sessions ids that me holds and has
// found idle (it alone knows whether a cell runs), and the active sessions
// idle past their TTL at now (by the stored last activity) whose holder is
// gone, and returns those it ended: each is ended by exactly one replica,
// whichever locks its row first (SKIP LOCKED lets the others pass over
// it), and a row another replica has since claimed is not touched.
func (r *Replicas) ReapIdle(ctx context.Context, me string, ids []string, reason string, now time.Time, gone time.Duration) ([]Reaped, error) {
	if ids == nil {
		ids = []string{}
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT s.id, s.user_id, s.sandbox FROM sessions s
		LEFT JOIN replicas r ON r.id = s.replica_id
		WHERE s.status = $1 AND ((s.replica_id = $3 AND s.id = ANY($5))
		OR (s.last_active + s.idle_ttl < $2 AND s.replica_id <> $3
			AND (r.id IS NULL OR r.heartbeat <= now() - make_interval(secs => $4))))
		FOR UPDATE OF s SKIP LOCKED`, string(store.SessionActive), now.UnixNano(), me, secs(gone), ids)
	if err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	var out []Reaped
	for rows.Next() {
		var x Reaped
		if err := rows.Scan(&x.ID, &x.UserID, &x.Sandbox); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reap: %w", err)
		}
		out = append(out, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	reaped := out[:0]
	for _, x := range out {
		// Decide again on the locked row as it is now (see lockHolder).
		var holder string
		if err := tx.QueryRowContext(ctx, `SELECT replica_id FROM sessions WHERE id = $1 AND status = $2`,
			x.ID, string(store.SessionActive)).Scan(&holder); errors.Is(err, sql.ErrNoRows) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reap %s: %w", x.ID, err)
		}
		if holder != me {
			live, err := alive(ctx, tx, holder, gone)
			if err != nil {
				return nil, fmt.Errorf("reap %s: %w", x.ID, err)
			}
			if live {
				continue
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET status = $2, end_reason = $3, ended = $4 WHERE id = $1`,
			x.ID, string(store.SessionEnded), reason, now.UnixNano()); err != nil {
			return nil, fmt.Errorf("reap %s: %w", x.ID, err)
		}
		reaped = append(reaped, x)
	}
	out = reaped
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	return out, nil
}

// OrphanBatches lists the running batches whose holder is gone (or none),
// for a live replica to claim and resume.
func (r *Replicas) OrphanBatches(ctx context.Context, me string, gone time.Duration) ([]string, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT b.id FROM batches b LEFT JOIN replicas r ON r.id = b.replica_id
		WHERE b.status = 'running' AND b.replica_id <> $1
		AND (r.id IS NULL OR r.heartbeat <= now() - make_interval(secs => $2)) ORDER BY b.created`, me, secs(gone))
	if err != nil {
		return nil, fmt.Errorf("orphan batches: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("orphan batches: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Holder returns the replica holding active session id ("" for none).
func (r *Replicas) Holder(ctx context.Context, id string) (string, error) {
	var h string
	err := r.db.QueryRowContext(ctx, `SELECT replica_id FROM sessions WHERE id = $1 AND status = $2`,
		id, string(store.SessionActive)).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	return h, err
}

// Lost returns those of ids (sessions me has in memory) that me no longer
// holds: ended, or taken over while me missed its heartbeats.
func (r *Replicas) Lost(ctx context.Context, me string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := r.db.QueryContext(ctx, `SELECT id FROM sessions WHERE id = ANY($1) AND (status <> $2 OR replica_id <> $3)`,
		ids, string(store.SessionActive), me)
	if err != nil {
		return nil, fmt.Errorf("lost sessions: %w", err)
	}
	defer rows.Close()
	var lost []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("lost sessions: %w", err)
		}
		lost = append(lost, id)
	}
	return lost, rows.Err()
}

// Elsewhere returns the limits of user's active sessions that other
// replicas hold (or none does), for the per-user caps to count them.
func (r *Replicas) Elsewhere(ctx context.Context, me, userID string) ([]kiln.Limits, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT limits FROM sessions WHERE user_id = $1 AND status = $2 AND replica_id <> $3`,
		userID, string(store.SessionActive), me)
	if err != nil {
		return nil, fmt.Errorf("sessions elsewhere: %w", err)
	}
	defer rows.Close()
	var out []kiln.Limits
	for rows.Next() {
		var raw string
		var l kiln.Limits
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("sessions elsewhere: %w", err)
		}
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			return nil, fmt.Errorf("sessions elsewhere: limits: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// Prune deletes the rows of replicas gone for longer than after that hold
// no active session or running batch (a Pod's replica with a fresh data
// directory each start leaves one row per start).
func (r *Replicas) Prune(ctx context.Context, after time.Duration) (int64, error) {
	res, err := r.db.ExecContext(ctx, `DELETE FROM replicas r WHERE r.heartbeat < now() - make_interval(secs => $1)
		AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.replica_id = r.id AND s.status = $2)
		AND NOT EXISTS (SELECT 1 FROM batches b WHERE b.replica_id = r.id AND b.status = 'running')`,
		secs(after), string(store.SessionActive))
	if err != nil {
		return 0, fmt.Errorf("prune replicas: %w", err)
	}
	// A rate bucket untouched for an hour is full again (for any burst a
	// server refills within the hour), as a missing row is.
	if _, err := r.db.ExecContext(ctx, `DELETE FROM rate_buckets WHERE at < now() - interval '1 hour'`); err != nil {
		return 0, fmt.Errorf("prune rate buckets: %w", err)
	}
	// The slots of replicas gone for the bound count for nothing; their
	// rows go once the replica's row does.
	if _, err := r.db.ExecContext(ctx, `DELETE FROM user_cells c WHERE NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = c.replica_id)`); err != nil {
		return 0, fmt.Errorf("prune user slots: %w", err)
	}
	return res.RowsAffected()
}

// ReleaseChannel is the LISTEN/NOTIFY channel on which a replica asks
// the holder of a session to let it go; the payload is the holder's id.
const ReleaseChannel = "kiln_release"

// AskRelease asks the live replica holding active session id to hand it
// to me (release_to) and wakes that replica on ReleaseChannel, in one
// statement. It returns the holder; me when me already holds it, and
// store.ErrNotFound when the session is not active.
func (r *Replicas) AskRelease(ctx context.Context, me, id string) (holder string, _ error) {
	err := r.db.QueryRowContext(ctx, `WITH s AS (
			UPDATE sessions SET release_to = CASE WHEN replica_id = $2 THEN '' ELSE $2 END
			WHERE id = $1 AND status = $3 RETURNING replica_id)
		SELECT replica_id, CASE WHEN replica_id = $2 THEN '' ELSE pg_notify($4, replica_id)::text END FROM s`,
		id, me, string(store.SessionActive), ReleaseChannel).Scan(&holder, new(string))
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("ask release: %w", err)
	}
	return holder, nil
}

// Withdraw takes back me's request for session id (its wait is over).
func (r *Replicas) Withdraw(ctx context.Context, me, id string) error {
	if _, err := r.db.ExecContext(ctx, `UPDATE sessions SET release_to = '' WHERE id = $1 AND release_to = $2`, id, me); err != nil {
		return fmt.Errorf("withdraw release request: %w", err)
	}
	return nil
}

// Releases lists the active sessions me holds that another replica has
// asked for.
func (r *Replicas) Releases(ctx context.Context, me string) ([]string, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT id FROM sessions WHERE replica_id = $1 AND status = $2 AND release_to NOT IN ('', $1)`,
		me, string(store.SessionActive))
	if err != nil {
		return nil, fmt.Errorf("release requests: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("release requests: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Release hands session id, which me holds and has let go of, to the
// replica that asked for it, with sandbox (the description of the sandbox
// it left running) for that replica to attach to. One statement, so the
// session has exactly one holder at every moment. It returns the new
// holder; store.ErrNotFound when the request was withdrawn meanwhile (or
// me no longer holds the session).
func (r *Replicas) Release(ctx context.Context, me, id, sandbox string) (to string, _ error) {
	err := r.db.QueryRowContext(ctx, `UPDATE sessions SET replica_id = release_to, release_to = '', sandbox = $3
		WHERE id = $1 AND replica_id = $2 AND status = $4 AND release_to NOT IN ('', $2) RETURNING replica_id`,
		id, me, sandbox, string(store.SessionActive)).Scan(&to)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("release session: %w", err)
	}
	return to, nil
}

// NoteSandbox records sandbox (its description) as the one of session
// id while me holds it, for the replica that takes the session over
// should me die: HandedOver gives it to that replica.
func (r *Replicas) NoteSandbox(ctx context.Context, me, id, sandbox string) error {
	if _, err := r.db.ExecContext(ctx, `UPDATE sessions SET sandbox = $3 WHERE id = $1 AND replica_id = $2 AND status = $4`,
		id, me, sandbox, string(store.SessionActive)); err != nil {
		return fmt.Errorf("note sandbox: %w", err)
	}
	return nil
}

// Gone returns those of ids (replica ids) that have a row here and have
// not heartbeaten within gone. An id without a row is left out: it may
// be a replica of another kiln, on another database.
func (r *Replicas) Gone(ctx context.Context, ids []string, gone time.Duration) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := r.db.QueryContext(ctx, `SELECT id FROM replicas WHERE id = ANY($1) AND heartbeat <= now() - make_interval(secs => $2) ORDER BY id`, ids, secs(gone))
	if err != nil {
		return nil, fmt.Errorf("gone replicas: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("gone replicas: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// NotedSandboxes returns the sandboxes noted for active sessions
// (NoteSandbox, Release): a replica taking a session over attaches to
// them.
func (r *Replicas) NotedSandboxes(ctx context.Context) ([]string, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT sandbox FROM sessions WHERE status = $1 AND sandbox <> ''`, string(store.SessionActive))
	if err != nil {
		return nil, fmt.Errorf("noted sandboxes: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var box string
		if err := rows.Scan(&box); err != nil {
			return nil, fmt.Errorf("noted sandboxes: %w", err)
		}
		out = append(out, box)
	}
	return out, rows.Err()
}

// HandedOver returns the holder of active session id and the sandbox its
// last holder left for it ("" for none), and clears the latter when me
// is the holder: a sandbox is attached to once.
func (r *Replicas) HandedOver(ctx context.Context, me, id string) (holder, sandbox string, _ error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return "", "", fmt.Errorf("handed-over session: %w", err)
	}
	defer tx.Rollback()
	err = tx.QueryRowContext(ctx, `SELECT replica_id, sandbox FROM sessions WHERE id = $1 AND status = $2 FOR UPDATE`,
		id, string(store.SessionActive)).Scan(&holder, &sandbox)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", store.ErrNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("handed-over session: %w", err)
	}
	if holder != me || sandbox == "" {
		return holder, "", nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET sandbox = '' WHERE id = $1`, id); err != nil {
		return "", "", fmt.Errorf("handed-over session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", "", fmt.Errorf("handed-over session: %w", err)
	}
	return holder, sandbox, nil
}

// Listen calls wake each time another replica asks me for a session (a
// notification on ReleaseChannel naming me), until ctx ends, on a
// connection of its own that it makes again after an error. A
// notification lost while the connection was down is not lost work: the
// holder also reads the requests (Releases) at every heartbeat.
func (r *Replicas) Listen(ctx context.Context, me string, wake func()) {
	for ctx.Err() == nil {
		err := r.listen(ctx, me, wake)
		if ctx.Err() != nil {
			return
		}
		_ = err // the heartbeat logs a database that does not answer
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (r *Replicas) listen(ctx context.Context, me string, wake func()) error {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("listen: not a pgx connection (%T)", dc)
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+ReleaseChannel); err != nil {
			return err
		}
		// The connection goes back to the pool when ctx ends: unlisten
		// first, so that it does not keep collecting notifications.
		defer pc.Exec(context.Background(), "UNLISTEN *")
		wake() // requests made before LISTEN
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			if n.Payload == me {
				wake()
			}
		}
	})
}

// TakeTokens takes one token from each bucket of names (an API key, a
// user), every replica's together, or from none, and answers how long to
// wait when one is empty. A bucket holds at most burst tokens and gains
// perSecond a second, on the database's clock; a name without a row has
// a full bucket. One statement: the decision reads the rows without a
// lock, and the update, made under the row lock, takes from the bucket
// as it is then, so two replicas racing for the last token may both get
// it and leave the bucket in debt, which the next requests wait out: the
// rate holds over time, a burst may pass by the number of racing
// requests. Its commit does not wait for the WAL to reach the disk
// (synchronous_commit off for this statement's transaction): a crash of
// the database may forget the last tokens taken, which costs nothing,
// where a flush per request would cost every request a disk write.
func (r *Replicas) TakeTokens(ctx context.Context, names []string, perSecond float64, burst int) (time.Duration, error) {
	var ok bool
	var wait float64
	err := r.db.QueryRowContext(ctx, `WITH b AS (
			SELECT n.name, COALESCE(LEAST($3::float8, r.tokens + EXTRACT(EPOCH FROM now() - r.at)::float8 * $2::float8), $3::float8) AS avail
			FROM unnest($1::text[]) AS n(name) LEFT JOIN rate_buckets r ON r.name = n.name),
		d AS (SELECT bool_and(avail >= 1) AS ok, COALESCE(max((1 - avail) / $2::float8) FILTER (WHERE avail < 1), 0) AS wait FROM b),
		up AS (INSERT INTO rate_buckets (name, tokens, at)
			SELECT b.name, b.avail - 1, now() FROM b, d WHERE d.ok
			ON CONFLICT (name) DO UPDATE SET
				tokens = LEAST($3::float8, rate_buckets.tokens + EXTRACT(EPOCH FROM now() - rate_buckets.at)::float8 * $2::float8) - 1,
				at = now())
		SELECT ok, wait FROM d, (SELECT set_config('synchronous_commit', 'off', true)) AS async`,
		names, perSecond, float64(burst)).Scan(&ok, &wait)
	if err != nil {
		return 0, fmt.Errorf("rate limit: %w", err)
	}
	if ok {
		return 0, nil
	}
	return max(time.Millisecond, time.Duration(wait*float64(time.Second))), nil
}

// TakeUserSlot records cell id of user as running on me if the user has
// fewer than perUser running on live replicas (gone ones' do not count),
// and says whether it did. A transaction under an advisory lock on the
// user orders racing takers: the count is read after the lock, in a
// statement of its own, so it sees every slot taken before.
func (r *Replicas) TakeUserSlot(ctx context.Context, me, userID, id string, perUser int, gone time.Duration) (bool, error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("user slot: %w", err)
	}
	defer tx.Rollback()
	// No WAL flush at commit: a slot lost in a crash of the database is
	// one cell over the cap while it runs; a release lost, the heartbeat's
	// sweep (KeepUserSlots) makes good.
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('kiln-user-cells:' || $1, 0)),
		set_config('synchronous_commit', 'off', true)`, userID); err != nil {
		return false, fmt.Errorf("user slot: %w", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM user_cells c JOIN replicas r ON r.id = c.replica_id
		WHERE c.user_id = $1 AND r.heartbeat > now() - make_interval(secs => $2)`, userID, secs(gone)).Scan(&n); err != nil {
		return false, fmt.Errorf("user slot: %w", err)
	}
	if n >= perUser {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO user_cells (id, user_id, replica_id) VALUES ($1, $2, $3)`, id, userID, me); err != nil {
		return false, fmt.Errorf("user slot: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("user slot: %w", err)
	}
	return true, nil
}

// ReleaseUserSlot gives back the slot of cell id.
func (r *Replicas) ReleaseUserSlot(ctx context.Context, id string) error {
	if _, err := r.db.ExecContext(ctx, `DELETE FROM user_cells WHERE id = $1 AND set_config('synchronous_commit', 'off', true) = 'off'`, id); err != nil {
		return fmt.Errorf("release user slot: %w", err)
	}
	return nil
}

// KeepUserSlots deletes me's slots other than ids (those it holds): a
// release that did not reach the database is made good.
func (r *Replicas) KeepUserSlots(ctx context.Context, me string, ids []string) error {
	if ids == nil {
		ids = []string{}
	}
	if _, err := r.db.ExecContext(ctx, `DELETE FROM user_cells WHERE replica_id = $1 AND NOT (id = ANY($2))`, me, ids); err != nil {
		return fmt.Errorf("keep user slots: %w", err)
	}
	return nil
}
