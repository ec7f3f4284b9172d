-- CPU time of each user's cells and runs per UTC day, for the daily CPU
-- budget: kept here so that a restart does not start the day's count again.
CREATE TABLE cpu_usage (
	user_id TEXT NOT NULL REFERENCES users (id),
	day     TEXT NOT NULL, -- YYYY-MM-DD, UTC
	cpu     BIGINT NOT NULL, -- nanoseconds
	PRIMARY KEY (user_id, day)
);
