-- Batches of judged one-shot runs (POST /v1/batches): the batch, and each
-- item with its result once it has run, so that a restart resumes the
-- items without a result.
CREATE TABLE batches (
	id       TEXT PRIMARY KEY,
	user_id  TEXT NOT NULL REFERENCES users (id),
	status   TEXT NOT NULL, -- running, done
	cache    BOOLEAN NOT NULL DEFAULT FALSE,
	total    BIGINT NOT NULL,
	created  BIGINT NOT NULL,
	finished BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX batches_status ON batches (status, created);

CREATE TABLE batch_items (
	batch_id TEXT NOT NULL REFERENCES batches (id),
	idx      BIGINT NOT NULL,
	item     TEXT NOT NULL,              -- JSON, the item as asked
	done     BOOLEAN NOT NULL DEFAULT FALSE,
	passed   BOOLEAN NOT NULL DEFAULT FALSE,
	reason   TEXT NOT NULL DEFAULT '',
	result   TEXT NOT NULL DEFAULT '',   -- JSON, the judged result
	finished BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (batch_id, idx)
);

-- One-shot results kept for reruns that ask for the cache, per user
-- (never shared), bounded per user by the service.
CREATE TABLE run_cache (
	user_id TEXT NOT NULL REFERENCES users (id),
	key     TEXT NOT NULL, -- hex SHA-256 of runtime version, code, files, stdin, args, limits
	result  TEXT NOT NULL, -- JSON
	created BIGINT NOT NULL,
	PRIMARY KEY (user_id, key)
);
CREATE INDEX run_cache_age ON run_cache (user_id, created);
