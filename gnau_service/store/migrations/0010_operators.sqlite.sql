-- Operators: every round, request id and player belongs to one operator; existing rows to 'default'.
-- One service deals for many operators (gnau_service/audit/operators.py). A table id, a request
-- id and a player id are an operator's own: two operators may both have an open round at
-- "table-1", reuse one request id, or seat a player "42", each their own. Round ids and player
-- references stay globally unique (the service makes them at random). SQLite cannot change a
-- primary key, so requests and player_keys are rebuilt; secure_delete zeroes the dropped pages,
-- and the scrub after the next forget truncates the -wal file that holds their older versions.
ALTER TABLE rounds ADD COLUMN operator TEXT NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS rounds_one_open_per_table;
CREATE UNIQUE INDEX IF NOT EXISTS rounds_one_open_per_table ON rounds (operator, table_id)
    WHERE state IN ('SHUFFLED', 'DEALT', 'REVEALED');
DROP INDEX IF EXISTS rounds_by_table;
CREATE INDEX IF NOT EXISTS rounds_by_table ON rounds (operator, table_id, created_at, round_id);
CREATE INDEX IF NOT EXISTS rounds_by_operator ON rounds (operator, created_at, round_id);
CREATE TABLE requests_by_operator (
    operator TEXT NOT NULL DEFAULT 'default',
    request_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (operator, request_id)
);
INSERT INTO requests_by_operator (request_id, operation, fingerprint, response, created_at)
    SELECT request_id, operation, fingerprint, response, created_at FROM requests;
DROP TABLE requests;
ALTER TABLE requests_by_operator RENAME TO requests;
CREATE INDEX IF NOT EXISTS requests_by_time ON requests (created_at);
CREATE TABLE player_keys_by_operator (
    operator TEXT NOT NULL DEFAULT 'default',
    player_id TEXT NOT NULL,
    secret BLOB NOT NULL CHECK (length(secret) = 32),
    created_at TEXT NOT NULL,
    PRIMARY KEY (operator, player_id)
);
INSERT INTO player_keys_by_operator (player_id, secret, created_at)
    SELECT player_id, secret, created_at FROM player_keys;
DROP TABLE player_keys;
ALTER TABLE player_keys_by_operator RENAME TO player_keys;
ALTER TABLE player_seats ADD COLUMN operator TEXT NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS player_seats_by_player;
CREATE INDEX IF NOT EXISTS player_seats_by_player ON player_seats (operator, player_id);
