-- The table catalogue: each operator's tables with their configuration, operators, and gaming.
-- A table's configuration (gnau_service/rounds/catalogue.py) is JSON. catalogue_tables holds the
-- version in force, changed in place, so that a Shuffle that read it under a share lock and a
-- change of it take turns (the Shuffle's round is logged before the change, or refused after
-- it); catalogue_versions keeps every version, since a round is played under the version its
-- commitment names. `logged` is 0 until the version has its TABLE_CHANGED entry: a change made
-- through the service appends it in the same step, and the tables catalogued here from the
-- rounds already played get theirs at the next start. They approve the rule sets they have
-- played (the default rules where no round names any), in no currency (ISO 4217 XXX), with the
-- limits of before: any stake up to 10^12 minor units, 82 seats, the service's deadlines. An
-- operator of a table has a row of its own (its switch and RTP band), and gaming one row.
CREATE TABLE IF NOT EXISTS catalogue_tables (
    operator TEXT NOT NULL,
    table_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    config TEXT NOT NULL,
    changed_at TEXT NOT NULL,
    PRIMARY KEY (operator, table_id)
);
CREATE TABLE IF NOT EXISTS catalogue_versions (
    operator TEXT NOT NULL,
    table_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    config TEXT NOT NULL,
    changed_at TEXT NOT NULL,
    logged INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (operator, table_id, version)
);
CREATE TABLE IF NOT EXISTS catalogue_operators (
    operator TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    changed_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS gaming (
    only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
    enabled INTEGER NOT NULL,
    changed_at TEXT NOT NULL
);
INSERT INTO gaming (only_row, enabled, changed_at) VALUES (1, 1, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    ON CONFLICT DO NOTHING;
INSERT INTO catalogue_versions (operator, table_id, version, config, changed_at, logged)
    SELECT operator, table_id, 1,
        '{"currency":{"code":"XXX","exponent":0},"deal_seconds":null,"enabled":true,'
        || '"max_seats":82,"max_stake":1000000000000,"min_stake":1,"rule_sets":['
        || COALESCE(string_agg(DISTINCT (record::json -> 'house_rules')::text, ','),
            '{"decks":1,"five_small":true,"payout":"points","suited_double":false,"ten_is_duke":false,"three_six_pair":false,"tie":"dealer","trips_make_ox":true}')
        || '],"settle_seconds":null}',
        to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 0
    FROM rounds GROUP BY operator, table_id
    ON CONFLICT DO NOTHING;
INSERT INTO catalogue_tables (operator, table_id, version, config, changed_at)
    SELECT operator, table_id, version, config, changed_at FROM catalogue_versions
    ON CONFLICT DO NOTHING;
INSERT INTO catalogue_operators (operator, config, changed_at)
    SELECT DISTINCT operator, '{"enabled":true,"rtp_band":null}', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    FROM catalogue_tables
    ON CONFLICT DO NOTHING;
