-- The sequencer's lease: which process integrates the outbox, until when, and under which epoch.
-- One row. A process takes it when it has expired or its holder's session is gone, adding one to
-- the epoch; the holder renews it inside each integration, which checks the epoch under the head
-- lock, so a deposed holder commits nothing (gnau_service/store/lease.py). The clock is the
-- database's alone.
CREATE TABLE IF NOT EXISTS log_lease (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    epoch BIGINT NOT NULL,
    holder TEXT NOT NULL,
    holder_pid INTEGER NOT NULL,
    renewed_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
-- Applied again (its tables exist), it must not wait for a sequencer that holds the row: NOT EXISTS
-- reads the committed row, where ON CONFLICT alone would wait for the holder's transaction.
INSERT INTO log_lease (id, epoch, holder, holder_pid, renewed_at, expires_at)
SELECT 1, 0, '', 0, now(), now() WHERE NOT EXISTS (SELECT 1 FROM log_lease)
ON CONFLICT (id) DO NOTHING;
