-- Witness cosignatures of the log's checkpoints (C2SP tlog-cosignature), beside the checkpoints.
-- One row per checkpoint size and witness key: `line` is the note signature line as the witness
-- returned it (without its newline), `timestamp` the POSIX time inside it. Rows are only added.
CREATE TABLE IF NOT EXISTS checkpoint_cosignatures (
    size BIGINT NOT NULL,
    witness TEXT NOT NULL,
    line TEXT NOT NULL,
    timestamp BIGINT NOT NULL,
    PRIMARY KEY (size, witness)
);
CREATE INDEX IF NOT EXISTS checkpoint_cosignatures_by_witness
    ON checkpoint_cosignatures (witness, size);
