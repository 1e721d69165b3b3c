"""Writes a unit queues (``Transaction.write``): sent with its next statement that answers, or when
it ends (one round trip on PostgreSQL), in order; a unit reads what it wrote; a queued write that
fails fails its unit alone, as if it had run at once, and nothing the unit wrote is kept."""

from __future__ import annotations

from collections.abc import Callable

from gnau_service.audit.signing import LogSigner
from gnau_service.store import Store, Transaction, open_store
from tests.steps import run_step, run_steps

INSERT = "INSERT INTO round_deadlines (round_id, due_at) VALUES (?, ?)"
NOTES = "SELECT round_id, due_at FROM round_deadlines ORDER BY round_id"


def notes(store: Store) -> list[tuple[str, str]]:
    return [(str(row[0]), str(row[1])) for row in store.query(NOTES)]


def test_a_unit_reads_its_queued_writes_in_order(database_url: str, signer: LogSigner) -> None:
    def unit(tx: Transaction) -> list[tuple[str, str]]:
        tx.write(INSERT, ("r-1", "first"))
        tx.write("UPDATE round_deadlines SET due_at = ? WHERE round_id = ?", ("changed", "r-1"))
        tx.write(INSERT, ("r-2", "second"))
        return [(str(row[0]), str(row[1])) for row in tx.execute(NOTES)]

    with open_store(database_url, signer) as store:
        expected = [("r-1", "changed"), ("r-2", "second")]
        assert run_step(store, unit) == expected
        assert notes(store) == expected


def test_a_failing_queued_write_fails_its_unit_alone(database_url: str, signer: LogSigner) -> None:
    def failing(tx: Transaction) -> str:
        tx.write(INSERT, ("r-3", "kept only if its unit succeeds"))
        tx.write("INSERT INTO no_such_table (x) VALUES (?)", (1,))
        return "never answered"

    def neighbour(round_id: str) -> Callable[[Transaction], str]:
        def unit(tx: Transaction) -> str:
            tx.write(INSERT, (round_id, "neighbour"))
            return "committed"

        return unit

    with open_store(database_url, signer) as store:
        answers = run_steps(
            store, [neighbour("r-4"), failing, neighbour("r-5")], return_exceptions=True
        )
        assert answers[0] == answers[2] == "committed"
        assert isinstance(answers[1], Exception)
        assert "no_such_table" in str(answers[1])
        assert notes(store) == [("r-4", "neighbour"), ("r-5", "neighbour")]


def test_queries_sent_together_answer_each_in_order(database_url: str, signer: LogSigner) -> None:
    """``query_all`` (one round trip on PostgreSQL): each query's rows, and a later query sees
    what the unit wrote before it."""

    def unit(tx: Transaction) -> list[list[tuple[str, str]]]:
        tx.write(INSERT, ("r-6", "six"))
        answers = tx.query_all(
            ("SELECT round_id, due_at FROM round_deadlines WHERE round_id = ?", ("r-6",)),
            ("SELECT round_id, due_at FROM round_deadlines WHERE round_id = ?", ("r-7",)),
            (NOTES, ()),
        )
        return [[(str(row[0]), str(row[1])) for row in rows] for rows in answers]

    with open_store(database_url, signer) as store:
        assert run_step(store, unit) == [[("r-6", "six")], [], [("r-6", "six")]]
