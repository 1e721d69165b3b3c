"""Statements run together (one round trip on PostgreSQL): in order, in the transaction they
begin, the rows of the last SELECT among them, and none after one that fails."""

import pytest

from gnau_service.audit.signing import LogSigner
from gnau_service.store import open_store


def test_statements_run_together_in_order_and_give_the_last_query_s_rows(
    database_url: str, signer: LogSigner
) -> None:
    with open_store(database_url, signer) as store:
        backend = store.backend
        connection = backend.connect()
        try:
            rows = backend.run_together(
                connection,
                [
                    backend.begin_sql,
                    "SELECT 1",
                    "INSERT INTO log_checkpoints (size, note) VALUES (7, 'seven')",
                    "SAVEPOINT unit",
                    "SELECT size, note FROM log_checkpoints WHERE size = 7",
                    "ROLLBACK TO SAVEPOINT unit",
                ],
            )
            assert [tuple(row) for row in rows] == [(7, "seven")]
            # Still in the transaction they began: a ROLLBACK takes the insert back.
            backend.run(connection, "ROLLBACK")
            assert backend.run(connection, "SELECT note FROM log_checkpoints WHERE size = 7") == []
        finally:
            backend.close_quietly(connection)


def test_a_failing_statement_stops_the_ones_after_it(database_url: str, signer: LogSigner) -> None:
    with open_store(database_url, signer) as store:
        backend = store.backend
        connection = backend.connect()
        try:
            with pytest.raises(Exception, match=r"(?i)no such table|does not exist"):
                backend.run_together(
                    connection,
                    [
                        "SELECT * FROM no_such_table",
                        "INSERT INTO log_checkpoints (size, note) VALUES (8, 'eight')",
                    ],
                )
            rows = backend.run(connection, "SELECT note FROM log_checkpoints WHERE size = 8")
            assert rows == []
        finally:
            backend.close_quietly(connection)
