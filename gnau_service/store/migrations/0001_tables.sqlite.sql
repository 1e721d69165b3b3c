-- The tables, indices and append-only triggers of schema version 1.
-- Frozen: exactly as gnau made them before there were migrations.
CREATE TABLE IF NOT EXISTS log_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size INTEGER NOT NULL,
    prev_hash TEXT NOT NULL,
    frontier BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS log_entries (
    idx INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    round_id TEXT,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS log_entries_by_round ON log_entries (round_id, idx)
    WHERE round_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS log_nodes (
    level INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (level, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log_checkpoints (size INTEGER PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_keys (
    key_id TEXT PRIMARY KEY,
    vkey TEXT NOT NULL UNIQUE,
    since_size INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (
    round_id TEXT PRIMARY KEY,
    table_id TEXT NOT NULL,
    state TEXT NOT NULL,
    record TEXT NOT NULL,
    server_seed TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS rounds_one_open_per_table ON rounds (table_id)
    WHERE state IN ('SHUFFLED', 'DEALT', 'REVEALED');
CREATE INDEX IF NOT EXISTS rounds_by_table ON rounds (table_id, created_at, round_id);
CREATE INDEX IF NOT EXISTS rounds_by_time ON rounds (created_at, round_id);
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT PRIMARY KEY,
    operation TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL
);

INSERT OR IGNORE INTO log_head (id, size, prev_hash, frontier)
    VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000', x'');

CREATE TRIGGER IF NOT EXISTS log_entries_no_update BEFORE UPDATE ON log_entries
    BEGIN SELECT RAISE(ABORT, 'log_entries is append-only'); END;
CREATE TRIGGER IF NOT EXISTS log_entries_no_delete BEFORE DELETE ON log_entries
    BEGIN SELECT RAISE(ABORT, 'log_entries is append-only'); END;

CREATE TRIGGER IF NOT EXISTS log_nodes_no_update BEFORE UPDATE ON log_nodes
    BEGIN SELECT RAISE(ABORT, 'log_nodes is append-only'); END;
CREATE TRIGGER IF NOT EXISTS log_nodes_no_delete BEFORE DELETE ON log_nodes
    BEGIN SELECT RAISE(ABORT, 'log_nodes is append-only'); END;

CREATE TRIGGER IF NOT EXISTS log_checkpoints_no_update BEFORE UPDATE ON log_checkpoints
    BEGIN SELECT RAISE(ABORT, 'log_checkpoints is append-only'); END;
CREATE TRIGGER IF NOT EXISTS log_checkpoints_no_delete BEFORE DELETE ON log_checkpoints
    BEGIN SELECT RAISE(ABORT, 'log_checkpoints is append-only'); END;

CREATE TRIGGER IF NOT EXISTS log_keys_no_update BEFORE UPDATE ON log_keys
    BEGIN SELECT RAISE(ABORT, 'log_keys is append-only'); END;
CREATE TRIGGER IF NOT EXISTS log_keys_no_delete BEFORE DELETE ON log_keys
    BEGIN SELECT RAISE(ABORT, 'log_keys is append-only'); END;
