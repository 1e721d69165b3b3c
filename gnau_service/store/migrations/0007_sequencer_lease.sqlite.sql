-- The sequencer's lease: PostgreSQL only, so nothing changes here but the version.
-- (On SQLite each step integrates its own events, in one process: nothing is elected.)
SELECT 1;
