-- Replicas share only PostgreSQL (0010_replicas.postgres.sql); a SQLite
-- store has one replica, so this version changes nothing.
SELECT 1;
