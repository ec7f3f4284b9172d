-- A SQLite store has one replica, whose rate limits are in memory
-- (0012_rate_buckets.postgres.sql shares them between replicas).
SELECT 1;
