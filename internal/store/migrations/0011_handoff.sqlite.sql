-- Handoff is between replicas, which share only PostgreSQL
-- (0011_handoff.postgres.sql); a SQLite store has one replica.
SELECT 1;
