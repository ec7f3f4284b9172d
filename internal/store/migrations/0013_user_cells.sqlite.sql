-- A SQLite store has one replica, whose queue caps each user in memory
-- (0013_user_cells.postgres.sql shares the cap between replicas).
SELECT 1;
