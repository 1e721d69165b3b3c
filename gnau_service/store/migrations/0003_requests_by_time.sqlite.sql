-- Idempotency records by age, so the old ones can be found (and pruned) without a full scan.
-- `requests` is not a log table: it has no append-only triggers, and an index changes no row.
CREATE INDEX IF NOT EXISTS requests_by_time ON requests (created_at);
