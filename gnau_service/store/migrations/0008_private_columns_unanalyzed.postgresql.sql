-- No statistics of the private player columns: ANALYZE would copy player ids and keys to pg_statistic.
-- ANALYZE (autovacuum's too) keeps up to 100 sample values of each column in pg_statistic, a
-- histogram of player ids and one of the raw keys, which forgetting a player never reaches. A
-- statistics target of 0 makes ANALYZE leave a column out (every lookup of these tables is by an
-- indexed key, which needs no histogram); changing a column's type, here to the type it has
-- (no rewrite), is what deletes the statistics already kept, for the table's owner.
ALTER TABLE player_keys ALTER COLUMN player_id TYPE TEXT, ALTER COLUMN secret TYPE BYTEA;
ALTER TABLE player_seats ALTER COLUMN player_id TYPE TEXT;
ALTER TABLE player_keys ALTER COLUMN player_id SET STATISTICS 0, ALTER COLUMN secret SET STATISTICS 0;
ALTER TABLE player_seats ALTER COLUMN player_id SET STATISTICS 0;
