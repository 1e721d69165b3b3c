"""The table catalogue's rows: each operator's tables, every version of each, operators, gaming.

The store does not interpret a configuration: ``config`` is JSON that the round logic writes and
reads (:mod:`gnau_service.rounds.catalogue`). ``catalogue_tables`` holds each table's version in
force, changed in place; ``catalogue_versions`` every version, since a round is played under the
version its commitment names. A table's operator has a row of its own (its switch and RTP band),
made with its first table, and gaming one row.

A Shuffle reads its table, its operator and gaming with a share lock
(:attr:`Transaction.share_lock`), and a change updates those rows in place: so the two take
turns. A Shuffle that read them first holds the change back until it commits, and its round is
logged before the change; one that comes second reads what the change made. No round is
therefore logged after the entry that disabled its table, operator or gaming.
"""

from __future__ import annotations

from typing import NamedTuple

from gnau_service.store.reader import ReadSource, read_rows
from gnau_service.store.transaction import Transaction


class CatalogueRow(NamedTuple):
    operator: str
    table_id: str
    version: int
    config: str
    changed_at: str


class ShuffleRows(NamedTuple):
    """What a Shuffle reads of the catalogue, in one query."""

    table: CatalogueRow
    operator_config: str
    gaming_enabled: bool


_COLUMNS = "operator, table_id, version, config, changed_at"


def _row(values: tuple[object, ...]) -> CatalogueRow:
    operator, table_id, version, config, changed_at = values
    return CatalogueRow(
        str(operator), str(table_id), int(str(version)), str(config), str(changed_at)
    )


def shuffle_rows(tx: Transaction, operator: str, table_id: str) -> ShuffleRows | None:
    """The table in force, its operator's configuration and whether gaming is on, each row
    share-locked until the step commits; None if ``operator`` has no such table."""
    rows = tx.execute(
        "SELECT t.operator, t.table_id, t.version, t.config, t.changed_at, o.config, g.enabled"
        " FROM catalogue_tables t"
        " JOIN catalogue_operators o ON o.operator = t.operator"
        " CROSS JOIN gaming g"
        " WHERE t.operator = ? AND t.table_id = ? AND g.only_row = 1" + tx.share_lock,
        (operator, table_id),
    )
    if not rows:
        return None
    values = tuple(rows[0])
    return ShuffleRows(_row(values[:5]), str(values[5]), bool(values[6]))


def table_in_force(tx: Transaction, operator: str, table_id: str) -> CatalogueRow | None:
    """The version of ``operator``'s table in force, locked to be changed; None if the operator
    has no such table."""
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM catalogue_tables WHERE operator = ? AND table_id = ?"
        + tx.row_lock,
        (operator, table_id),
    )
    return _row(tuple(rows[0])) if rows else None


def table_version(
    source: ReadSource, operator: str, table_id: str, version: int
) -> CatalogueRow | None:
    """One version of a table: the one a round was played under (never changed once made)."""
    rows = read_rows(
        source,
        f"SELECT {_COLUMNS} FROM catalogue_versions"
        " WHERE operator = ? AND table_id = ? AND version = ?",
        (operator, table_id, version),
    )
    return _row(tuple(rows[0])) if rows else None


def save_table_version(tx: Transaction, row: CatalogueRow, *, operator_config: str) -> None:
    """Make ``row`` its table's version in force (its first version adds the table, and its
    operator's row, as ``operator_config``, if it has none), and keep it among the table's
    versions."""
    tx.execute(
        f"INSERT INTO catalogue_versions ({_COLUMNS}, logged) VALUES (?, ?, ?, ?, ?, 1)", row
    )
    if row.version == 1:
        tx.execute(f"INSERT INTO catalogue_tables ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)", row)
        tx.execute(
            "INSERT INTO catalogue_operators (operator, config, changed_at) VALUES (?, ?, ?)"
            " ON CONFLICT (operator) DO NOTHING",
            (row.operator, operator_config, row.changed_at),
        )
        return
    tx.execute(
        "UPDATE catalogue_tables SET version = ?, config = ?, changed_at = ?"
        " WHERE operator = ? AND table_id = ?",
        (row.version, row.config, row.changed_at, row.operator, row.table_id),
    )


def tables_in_force(tx: Transaction, operator: str | None) -> list[CatalogueRow]:
    """The versions in force of ``operator``'s tables (every operator's for None), by operator
    and table id."""
    where, params = ("", ()) if operator is None else (" WHERE operator = ?", (operator,))
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM catalogue_tables{where} ORDER BY operator, table_id", params
    )
    return [_row(tuple(row)) for row in rows]


def has_tables(tx: Transaction) -> bool:
    """Whether any operator has catalogued a table."""
    return bool(tx.execute("SELECT 1 FROM catalogue_tables LIMIT 1"))


def count_tables(tx: Transaction, operator: str) -> int:
    """How many tables ``operator`` has catalogued."""
    rows = tx.execute("SELECT count(*) FROM catalogue_tables WHERE operator = ?", (operator,))
    return int(rows[0][0])


def unlogged_versions(tx: Transaction) -> list[CatalogueRow]:
    """Versions with no TABLE_CHANGED entry yet (those the migration made), oldest first."""
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM catalogue_versions WHERE logged = 0"
        " ORDER BY operator, table_id, version" + tx.row_lock
    )
    return [_row(tuple(row)) for row in rows]


def mark_logged(tx: Transaction, row: CatalogueRow) -> None:
    tx.execute(
        "UPDATE catalogue_versions SET logged = 1"
        " WHERE operator = ? AND table_id = ? AND version = ?",
        (row.operator, row.table_id, row.version),
    )


def operator_config(tx: Transaction, operator: str) -> str | None:
    """An operator's configuration (JSON), locked to be changed; None if it has none yet."""
    rows = tx.execute(
        "SELECT config FROM catalogue_operators WHERE operator = ?" + tx.row_lock, (operator,)
    )
    return str(rows[0][0]) if rows else None


def save_operator_config(tx: Transaction, operator: str, config: str) -> None:
    """Change an operator's configuration in place (made with its row if it has none)."""
    tx.execute(
        "INSERT INTO catalogue_operators (operator, config, changed_at) VALUES (?, ?, ?)"
        " ON CONFLICT (operator) DO UPDATE SET config = excluded.config,"
        " changed_at = excluded.changed_at",
        (operator, config, tx.time),
    )


def gaming_enabled(tx: Transaction) -> bool:
    """Whether gaming is on, service-wide, locked to be changed."""
    rows = tx.execute("SELECT enabled FROM gaming WHERE only_row = 1" + tx.row_lock)
    return not rows or bool(rows[0][0])


def save_gaming(tx: Transaction, enabled: bool) -> None:
    tx.execute(
        "UPDATE gaming SET enabled = ?, changed_at = ? WHERE only_row = 1",
        (1 if enabled else 0, tx.time),
    )
