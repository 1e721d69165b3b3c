"""Witness cosignatures of the log's checkpoints, kept beside them (migration 4).

A witness (C2SP tlog-witness) that has checked a checkpoint consistent with everything it saw
before returns a cosignature: one more note signature line for the checkpoint. The log keeps
each line it received and verified, by checkpoint size and witness key, and serves a checkpoint
as its note with those lines appended: a signed note with more signature lines, which any
verifier that does not know the witnesses' keys reads as before (the spec has it ignore them).

A checkpoint is *cosigned* under a :class:`WitnessQuorum` once ``threshold`` of its witnesses
have cosigned it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from gnau_service.store.reader import LogReader
from gnau_service.store.transaction import Transaction


class CheckpointNote(NamedTuple):
    """A signed checkpoint: the log size it signs, and its note (with cosignature lines, where
    they are asked for)."""

    size: int
    note: str


@dataclass(frozen=True)
class WitnessQuorum:
    """The witnesses a log asks (by verifier key) and how many must cosign a checkpoint."""

    witnesses: tuple[str, ...]
    threshold: int

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= len(self.witnesses):
            raise ValueError(
                f"a quorum of {self.threshold} is not between 0 and the "
                f"{len(self.witnesses)} witnesses"
            )


#: A log without witnesses: every checkpoint counts as cosigned.
NO_WITNESSES: Final = WitnessQuorum((), 0)


@dataclass(frozen=True)
class WitnessProgress:
    """The largest checkpoint size a witness has cosigned for this log, and when (the POSIX
    time in its cosignature)."""

    size: int
    timestamp: int


def keeps_cosignatures(reader: LogReader) -> bool:
    """Whether the database has the cosignatures' table: a reader of a database whose schema
    predates migration 4 (not migrated yet) finds none there, rather than an error."""
    backend = reader.backend
    with backend.unavailable_as_store_error(), backend.reader() as connection:
        return backend.has_table(connection, "checkpoint_cosignatures")


def add_cosignature(tx: Transaction, size: int, witness: str, line: str, timestamp: int) -> None:
    """Keep a verified cosignature ``line`` (without its newline) of the checkpoint of ``size``
    by the witness whose verifier key is ``witness``. A second one for the same checkpoint and
    witness is ignored: either proves the same thing."""
    tx.execute(
        "INSERT INTO checkpoint_cosignatures (size, witness, line, timestamp)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (size, witness) DO NOTHING",
        (size, witness, line, timestamp),
    )


def cosignature_lines(reader: LogReader, size: int) -> list[str]:
    """The cosignature lines of the checkpoint of ``size``, each with its newline, in a fixed
    order (by witness key)."""
    rows = reader.query(
        "SELECT line FROM checkpoint_cosignatures WHERE size = ? ORDER BY witness", (size,)
    )
    return [f"{row[0]}\n" for row in rows]


def with_cosignatures(reader: LogReader, size: int, note: str) -> str:
    """The checkpoint ``note`` of ``size`` with its cosignature lines appended."""
    return note + "".join(cosignature_lines(reader, size))


def served_checkpoint(
    reader: LogReader, quorum: WitnessQuorum, *, cosigned: bool, at_least: int = 0
) -> CheckpointNote | None:
    """The checkpoint to serve, its note with its cosignatures: the newest of at
    least ``at_least`` entries that ``quorum`` has cosigned if ``cosigned`` and there is one,
    else the latest; None if the log has signed none."""
    if cosigned and quorum.threshold > 0:
        size = cosigned_size(reader, quorum, at_least)
        note = None if size is None else reader.checkpoint(size)
        if size is not None and note is not None:
            return CheckpointNote(size, with_cosignatures(reader, size, note))
    # The latest and its cosignatures in one read (the path of every plain GetCheckpoint).
    rows = reader.query(
        "SELECT latest.size, latest.note, c.line FROM"
        " (SELECT size, note FROM log_checkpoints ORDER BY size DESC LIMIT 1) AS latest"
        " LEFT JOIN checkpoint_cosignatures AS c ON c.size = latest.size ORDER BY c.witness"
    )
    if not rows:
        return None
    lines = "".join(f"{row[2]}\n" for row in rows if row[2] is not None)
    return CheckpointNote(int(rows[0][0]), str(rows[0][1]) + lines)


def with_cosignatures_in(reader: LogReader, notes: Sequence[CheckpointNote]) -> list[str]:
    """Each checkpoint's note with its cosignature lines: one read for them all."""
    if not notes:
        return []
    rows = reader.query(
        "SELECT size, line FROM checkpoint_cosignatures WHERE size >= ? AND size <= ?"
        " ORDER BY size, witness",
        (notes[0][0], notes[-1][0]),
    )
    lines: dict[int, list[str]] = {}
    for size, line in rows:
        lines.setdefault(int(size), []).append(f"{line}\n")
    return [note + "".join(lines.get(size, ())) for size, note in notes]


def cosigned_size(reader: LogReader, quorum: WitnessQuorum, at_least: int = 0) -> int | None:
    """The size of the newest checkpoint (of at least ``at_least`` entries) that ``quorum``
    has cosigned."""
    if quorum.threshold == 0:
        rows = reader.query("SELECT MAX(size) FROM log_checkpoints WHERE size >= ?", (at_least,))
    else:
        rows = reader.query(  # only "?" placeholders are formatted in
            "SELECT MAX(size) FROM (SELECT size FROM checkpoint_cosignatures"  # noqa: S608
            f" WHERE size >= ? AND witness IN ({_placeholders(quorum.witnesses)})"
            " GROUP BY size HAVING COUNT(*) >= ?) AS cosigned",
            (at_least, *quorum.witnesses, quorum.threshold),
        )
    return None if not rows or rows[0][0] is None else int(rows[0][0])


def witness_progress(reader: LogReader, witness: str) -> WitnessProgress | None:
    """How far ``witness`` has cosigned this log, from the cosignatures kept; None if never."""
    rows = reader.query(
        "SELECT size, timestamp FROM checkpoint_cosignatures WHERE witness = ?"
        " ORDER BY size DESC LIMIT 1",
        (witness,),
    )
    return WitnessProgress(int(rows[0][0]), int(rows[0][1])) if rows else None


def _placeholders(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values) or "NULL"
