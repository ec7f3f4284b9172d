-- A session's read-only mounts (issue 11), kept so that a session resumed
-- after a restart of kiln has them again: JSON of []kiln.Mount
-- ([{"source":"/srv/proj","target":"/project"}]); '' = none, as in rows
-- from before they were kept.
ALTER TABLE sessions ADD COLUMN mounts TEXT NOT NULL DEFAULT '';
