-- An API key may be limited to a scope: '' = everything its user may do,
-- 'metrics' = only GET /metrics (for Prometheus).
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT '';
