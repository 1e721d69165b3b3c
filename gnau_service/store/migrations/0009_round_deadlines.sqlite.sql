-- Round deadlines and completions: when the service completes an open round itself, and who completed each round.
-- round_deadlines holds one row for each open round: its deal deadline while SHUFFLED, its
-- settle deadline once dealt; the step that makes the round final deletes it, so the sweep that
-- completes due rounds reads a small table in deadline order. round_completions says who settled
-- or voided each round and when (the log's actor), for ListRounds' reconciliation filters.
-- Rounds already open when this runs are due an hour after their last change.
CREATE TABLE IF NOT EXISTS round_deadlines (
    round_id TEXT PRIMARY KEY,
    due_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS round_deadlines_by_time ON round_deadlines (due_at, round_id);
CREATE TABLE IF NOT EXISTS round_completions (
    round_id TEXT PRIMARY KEY,
    completed_by TEXT NOT NULL,
    completed_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS round_completions_by_actor
    ON round_completions (completed_by, completed_at);
INSERT OR IGNORE INTO round_deadlines (round_id, due_at)
    SELECT round_id,
        strftime('%Y-%m-%dT%H:%M:%S', updated_at, '+3600 seconds') || substr(updated_at, 20)
    FROM rounds WHERE state IN ('SHUFFLED', 'DEALT', 'REVEALED');
