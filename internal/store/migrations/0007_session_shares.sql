-- Shared sessions: the owner of a session shares it with another user
-- as a viewer (reads) or a collaborator (runs cells, writes files).
-- Revoking deletes the row; every request checks the row again.
CREATE TABLE session_shares (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	user_id    TEXT NOT NULL REFERENCES users (id),
	role       TEXT NOT NULL, -- viewer | collaborator
	created    BIGINT NOT NULL,
	PRIMARY KEY (session_id, user_id)
);
CREATE INDEX session_shares_user ON session_shares (user_id, session_id);

-- Who acted: the owner is charged (user_id), the actor is who did it
-- (a collaborator in a shared session, else the owner). '' in rows from
-- before sharing existed.
ALTER TABLE executions ADD COLUMN actor TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_log ADD COLUMN actor TEXT NOT NULL DEFAULT '';
-- What one user did, everywhere (GET /v1/audit?actor=).
CREATE INDEX audit_log_actor ON audit_log (actor, at, id);
