-- Session handoff between live replicas (issue 15): a replica that wants
-- a session another live replica holds names itself in release_to (and
-- notifies the holder on the kiln_release channel); the holder, once the
-- session is idle, lets go of its sandbox without destroying it, makes the
-- asker the holder in the same statement, and leaves the sandbox's
-- description (JSON: backend.Sandbox) in sandbox for it to attach to.
ALTER TABLE sessions ADD COLUMN release_to TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN sandbox TEXT NOT NULL DEFAULT '';
