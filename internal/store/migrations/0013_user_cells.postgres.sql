-- The per-user concurrency cap across replicas (issue 15): a row per
-- running cell or run, by the replica running it; a gone replica's rows
-- are not counted and are pruned (postgres.Replicas.TakeUserSlot).
CREATE TABLE user_cells (
	id         TEXT PRIMARY KEY,
	user_id    TEXT NOT NULL,
	replica_id TEXT NOT NULL,
	started    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX user_cells_user ON user_cells (user_id);
