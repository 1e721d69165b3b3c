-- The outbox: each committed round step's events, waiting for the sequencer to give them indices.
-- A step inserts its events here (never touching log_head); the sequencer takes the rows whose
-- idx is NULL in id order, appends them to the log and sets idx (and drops the payload). The row
-- stays, so that a round record can name its entries by pending id before they have an index.
CREATE TABLE IF NOT EXISTS log_pending (
    id BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    round_id TEXT,
    payload TEXT,
    time TEXT NOT NULL,
    idx BIGINT UNIQUE
);
CREATE INDEX IF NOT EXISTS log_pending_waiting ON log_pending (id) WHERE idx IS NULL;
