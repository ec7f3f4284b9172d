-- Request rate limits shared by every replica (issue 15): a token bucket
-- per name (an API key, a user), refilled on the database's clock and
-- taken from in one statement (postgres.Replicas.TakeTokens).
CREATE TABLE rate_buckets (
	name   TEXT PRIMARY KEY,
	tokens DOUBLE PRECISION NOT NULL,
	at     TIMESTAMPTZ NOT NULL
);
