-- Migration history: each migration from this one on, when it ran and under which gnau.
-- `gnau db status` shows it; version 1 predates it, so it has no row.
CREATE TABLE IF NOT EXISTS gnau_migrations (
    version INTEGER PRIMARY KEY,
    summary TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    gnau_version TEXT NOT NULL
);
