-- No statistics of the private player columns: ANALYZE would copy player ids and keys to pg_statistic.
-- PostgreSQL only, so nothing changes here but the version: the service never runs ANALYZE on
-- SQLite, and sqlite_stat1 holds row counts, never a value.
SELECT 1;
