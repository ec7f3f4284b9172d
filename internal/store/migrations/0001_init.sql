-- One portable schema for SQLite and PostgreSQL. Times are unix nanoseconds
-- (0 = never), JSON is TEXT, ids are made by the application.

CREATE TABLE users (
	id      TEXT PRIMARY KEY,
	name    TEXT NOT NULL UNIQUE,
	admin   BOOLEAN NOT NULL DEFAULT FALSE,
	created BIGINT NOT NULL
);

CREATE TABLE api_keys (
	id        TEXT PRIMARY KEY,
	user_id   TEXT NOT NULL REFERENCES users (id),
	name      TEXT NOT NULL,
	prefix    TEXT NOT NULL,
	hash      TEXT NOT NULL UNIQUE, -- hex SHA-256 of the key; the key itself is never stored
	created   BIGINT NOT NULL,
	last_used BIGINT NOT NULL DEFAULT 0,
	revoked   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX api_keys_user ON api_keys (user_id, created, id);

CREATE TABLE sessions (
	id          TEXT PRIMARY KEY,
	user_id     TEXT NOT NULL REFERENCES users (id),
	languages   TEXT NOT NULL, -- JSON array of strings
	limits      TEXT NOT NULL, -- JSON kiln.Limits
	metadata    TEXT NOT NULL, -- JSON object of strings; also in session_metadata for filtering
	status      TEXT NOT NULL, -- active | ended
	end_reason  TEXT NOT NULL DEFAULT '',
	idle_ttl    BIGINT NOT NULL, -- nanoseconds
	created     BIGINT NOT NULL,
	last_active BIGINT NOT NULL,
	ended       BIGINT NOT NULL DEFAULT 0,
	sandbox_id  TEXT NOT NULL DEFAULT '',
	exec_count  BIGINT NOT NULL DEFAULT 0 -- last execution sequence number handed out
);
CREATE INDEX sessions_user ON sessions (user_id, created, id);
CREATE INDEX sessions_status ON sessions (status, last_active);

CREATE TABLE session_metadata (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	name       TEXT NOT NULL,
	value      TEXT NOT NULL,
	PRIMARY KEY (session_id, name)
);
CREATE INDEX session_metadata_pair ON session_metadata (name, value);

CREATE TABLE executions (
	id         TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions (id),
	user_id    TEXT NOT NULL REFERENCES users (id),
	seq        BIGINT NOT NULL,
	language   TEXT NOT NULL,
	code       TEXT NOT NULL,
	code_hash  TEXT NOT NULL,
	status     TEXT NOT NULL,
	result     TEXT NOT NULL DEFAULT '', -- JSON kiln.CellResult once finished
	started    BIGINT NOT NULL,
	ended      BIGINT NOT NULL DEFAULT 0,
	UNIQUE (session_id, seq)
);

CREATE TABLE artifacts (
	id           TEXT PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions (id),
	execution_id TEXT NOT NULL REFERENCES executions (id),
	user_id      TEXT NOT NULL REFERENCES users (id),
	path         TEXT NOT NULL,
	size         BIGINT NOT NULL,
	change       TEXT NOT NULL,
	created      BIGINT NOT NULL
);
CREATE INDEX artifacts_session ON artifacts (session_id, created, id);
CREATE INDEX artifacts_execution ON artifacts (execution_id, created, id);

-- No foreign keys: the log outlives what it mentions.
CREATE TABLE audit_log (
	id           TEXT PRIMARY KEY,
	at           BIGINT NOT NULL,
	user_id      TEXT NOT NULL DEFAULT '',
	action       TEXT NOT NULL,
	session_id   TEXT NOT NULL DEFAULT '',
	execution_id TEXT NOT NULL DEFAULT '',
	code_hash    TEXT NOT NULL DEFAULT '',
	outcome      TEXT NOT NULL DEFAULT '',
	detail       TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_at ON audit_log (at, id);
CREATE INDEX audit_log_user ON audit_log (user_id, at, id);
CREATE INDEX audit_log_session ON audit_log (session_id, at, id);
