-- A session's network policy (issue 13), kept so that a session resumed
-- after a restart of kiln has the policy it had: JSON of
-- kiln.NetworkPolicy ({"mode":"allowlist","allow":[...]}); '' = none, as
-- in rows from before it was kept.
ALTER TABLE sessions ADD COLUMN network TEXT NOT NULL DEFAULT '';
