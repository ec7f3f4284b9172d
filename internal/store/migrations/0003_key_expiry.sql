-- An API key may expire: unix nanoseconds, 0 = never. Authentication
-- refuses an expired key with a message that says so.
ALTER TABLE api_keys ADD COLUMN expires BIGINT NOT NULL DEFAULT 0;
