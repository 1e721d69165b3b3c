-- The tables, indices and append-only triggers of schema version 1.
-- Frozen: exactly as gnau made them before there were migrations.
CREATE TABLE IF NOT EXISTS log_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size BIGINT NOT NULL,
    prev_hash TEXT NOT NULL,
    frontier BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS log_entries (
    idx BIGINT PRIMARY KEY,
    kind TEXT NOT NULL,
    round_id TEXT,
    data BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS log_entries_by_round ON log_entries (round_id, idx)
    WHERE round_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS log_nodes (
    level INTEGER NOT NULL,
    idx BIGINT NOT NULL,
    hash BYTEA NOT NULL,
    PRIMARY KEY (level, idx)
);
CREATE TABLE IF NOT EXISTS log_checkpoints (size BIGINT PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_keys (
    key_id TEXT PRIMARY KEY,
    vkey TEXT NOT NULL UNIQUE,
    since_size BIGINT NOT NULL
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

INSERT INTO log_head (id, size, prev_hash, frontier)
    VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000', ''::bytea) ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION gnau_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;

CREATE OR REPLACE TRIGGER log_entries_append_only BEFORE UPDATE OR DELETE ON log_entries
    FOR EACH ROW EXECUTE FUNCTION gnau_refuse_change();
CREATE OR REPLACE TRIGGER log_entries_no_truncate BEFORE TRUNCATE ON log_entries
    FOR EACH STATEMENT EXECUTE FUNCTION gnau_refuse_change();

CREATE OR REPLACE TRIGGER log_nodes_append_only BEFORE UPDATE OR DELETE ON log_nodes
    FOR EACH ROW EXECUTE FUNCTION gnau_refuse_change();
CREATE OR REPLACE TRIGGER log_nodes_no_truncate BEFORE TRUNCATE ON log_nodes
    FOR EACH STATEMENT EXECUTE FUNCTION gnau_refuse_change();

CREATE OR REPLACE TRIGGER log_checkpoints_append_only BEFORE UPDATE OR DELETE ON log_checkpoints
    FOR EACH ROW EXECUTE FUNCTION gnau_refuse_change();
CREATE OR REPLACE TRIGGER log_checkpoints_no_truncate BEFORE TRUNCATE ON log_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION gnau_refuse_change();

CREATE OR REPLACE TRIGGER log_keys_append_only BEFORE UPDATE OR DELETE ON log_keys
    FOR EACH ROW EXECUTE FUNCTION gnau_refuse_change();
CREATE OR REPLACE TRIGGER log_keys_no_truncate BEFORE TRUNCATE ON log_keys
    FOR EACH STATEMENT EXECUTE FUNCTION gnau_refuse_change();

CREATE TABLE IF NOT EXISTS gnau_schema (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
