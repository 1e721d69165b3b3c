-- Operators: every round, request id and player belongs to one operator; existing rows to 'default'.
-- One service deals for many operators (gnau_service/audit/operators.py). A table id, a request
-- id and a player id are an operator's own: two operators may both have an open round at
-- "table-1", reuse one request id, or seat a player "42", each their own. Round ids and player
-- references stay globally unique (the service makes them at random). The private columns keep
-- the statistics target of migration 8: adding a column and a key analyzes nothing.
ALTER TABLE rounds ADD COLUMN IF NOT EXISTS operator TEXT NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS rounds_one_open_per_table;
CREATE UNIQUE INDEX IF NOT EXISTS rounds_one_open_per_table ON rounds (operator, table_id)
    WHERE state IN ('SHUFFLED', 'DEALT', 'REVEALED');
DROP INDEX IF EXISTS rounds_by_table;
CREATE INDEX IF NOT EXISTS rounds_by_table ON rounds (operator, table_id, created_at, round_id);
CREATE INDEX IF NOT EXISTS rounds_by_operator ON rounds (operator, created_at, round_id);
ALTER TABLE requests ADD COLUMN IF NOT EXISTS operator TEXT NOT NULL DEFAULT 'default';
ALTER TABLE requests DROP CONSTRAINT IF EXISTS requests_pkey;
ALTER TABLE requests ADD CONSTRAINT requests_pkey PRIMARY KEY (operator, request_id);
ALTER TABLE player_keys ADD COLUMN IF NOT EXISTS operator TEXT NOT NULL DEFAULT 'default';
ALTER TABLE player_keys DROP CONSTRAINT IF EXISTS player_keys_pkey;
ALTER TABLE player_keys ADD CONSTRAINT player_keys_pkey PRIMARY KEY (operator, player_id);
ALTER TABLE player_seats ADD COLUMN IF NOT EXISTS operator TEXT NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS player_seats_by_player;
CREATE INDEX IF NOT EXISTS player_seats_by_player ON player_seats (operator, player_id);
