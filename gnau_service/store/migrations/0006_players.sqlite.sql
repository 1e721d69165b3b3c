-- Pseudonymous seats: each player's secret key, and which player each seat reference names.
-- Private tables, never in the log, an export or a bundle (a backup holds them as every table).
-- The reference of a seat is an HMAC-SHA-256 under the key of its player (fairness/player_refs.py);
-- forgetting a player deletes the key and the player_seats rows, and nothing links them any more.
CREATE TABLE IF NOT EXISTS player_keys (
    player_id TEXT PRIMARY KEY,
    secret BLOB NOT NULL CHECK (length(secret) = 32),
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS player_seats (
    player_ref TEXT PRIMARY KEY,
    player_id TEXT NOT NULL,
    round_id TEXT NOT NULL,
    seat_number INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS player_seats_by_player ON player_seats (player_id);
