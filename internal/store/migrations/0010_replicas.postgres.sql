-- Replicas of kiln serve sharing this database (issue 15): each registers
-- and heartbeats on the database's clock; one whose heartbeat is older than
-- the bound is gone. A session or batch is held by one replica (replica_id,
-- '' for none); rows are claimed with row locks, never by a home-made
-- consensus.
CREATE TABLE replicas (
	id        TEXT PRIMARY KEY,
	addr      TEXT NOT NULL DEFAULT '',
	started   TIMESTAMPTZ NOT NULL DEFAULT now(),
	heartbeat TIMESTAMPTZ NOT NULL DEFAULT now()
);
ALTER TABLE sessions ADD COLUMN replica_id TEXT NOT NULL DEFAULT '';
ALTER TABLE batches ADD COLUMN replica_id TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_replica ON sessions (replica_id) WHERE status = 'active';
