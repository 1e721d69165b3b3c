"""The witness's memory: the latest cosigned checkpoint of each log, and the evidence it refused.

One SQLite file (0600, WAL, ``synchronous = FULL``). :meth:`WitnessState.add_checkpoint` reads
the latest checkpoint, judges the new one (:func:`~gnau_service.witness.verdict.judge`), and
either records it as the new latest or records the refusal as evidence, all in one ``BEGIN
IMMEDIATE`` transaction: two submissions at once (in this process or another on the same file)
take turns, so the race tlog-witness describes (a smaller checkpoint checked before, but stored
after, a larger one) cannot roll the witness back. The cosignature is made inside the same
transaction, so what is returned is always what was stored.

Tables::

    witness_checkpoints  origin (key), size (decimal text: sizes reach 2**64-1), root_hash,
                         checkpoint (the signed note as received), cosignature (our line),
                         cosigned_at (POSIX seconds)
    witness_evidence     one row per distinct refused, validly signed submission: origin,
                         refusal, status, reason, old_size, proof (base64 lines), checkpoint
                         (the note's text and only its trusted-key signatures),
                         latest_size and latest_checkpoint at the time, first_seen, last_seen
                         (RFC 3339), times (how often it was submitted)

``sqlite3 witness.db "SELECT * FROM witness_evidence WHERE refusal = 'root_mismatch'"`` lists the
forks; ``gnau witness evidence`` prints the same. Forks are never deleted; other refusals are
capped (:data:`MAX_EVIDENCE_PER_ORIGIN`, :data:`MAX_EVIDENCE_TOTAL`), oldest deleted first.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from gnau_service.audit.checkpoint import Checkpoint, SignedCheckpoint
from gnau_service.audit.cosignature import WitnessSigner, cosign
from gnau_service.audit.note import NoteSignature, encode_base64
from gnau_service.audit.timestamps import format_utc_timestamp
from gnau_service.store.schema import first_line
from gnau_service.store.sqlite import make_private
from gnau_service.witness.verdict import Refusal, Refused, judge

#: ``PRAGMA user_version`` of a witness database; a gnau dealer database is refused by its tables.
SCHEMA_VERSION: Final = 1
#: The busy timeout: how long a submission waits for another one's transaction.
BUSY_TIMEOUT_SECONDS: Final = 30.0
#: The most non-fork evidence rows kept for one log; beyond it the oldest one is deleted.
MAX_EVIDENCE_PER_ORIGIN: Final = 1_000
#: The most non-fork evidence rows kept in all; beyond it the oldest one is deleted.
MAX_EVIDENCE_TOTAL: Final = 10_000

SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS witness_checkpoints (
        origin TEXT PRIMARY KEY,
        size TEXT NOT NULL,
        root_hash BLOB NOT NULL,
        checkpoint TEXT NOT NULL,
        cosignature TEXT NOT NULL,
        cosigned_at INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS witness_evidence (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        digest BLOB NOT NULL UNIQUE,
        origin TEXT NOT NULL,
        refusal TEXT NOT NULL,
        status INTEGER NOT NULL,
        reason TEXT NOT NULL,
        old_size TEXT NOT NULL,
        proof TEXT NOT NULL,
        checkpoint TEXT NOT NULL,
        latest_size TEXT NOT NULL,
        latest_checkpoint TEXT,
        first_seen TEXT NOT NULL,
        last_seen TEXT NOT NULL,
        times INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS witness_evidence_origin ON witness_evidence (origin, refusal)",
)


class WitnessStateError(Exception):
    """The witness database cannot be opened or used."""


@dataclass(frozen=True)
class Latest:
    """The latest checkpoint cosigned for a log, as stored."""

    checkpoint: Checkpoint
    note: str
    cosignature: str
    cosigned_at: int


@dataclass(frozen=True)
class Evidence:
    """A refused, validly signed submission (possibly sent several times)."""

    id: int
    origin: str
    refusal: Refusal
    status: int
    reason: str
    old_size: int
    proof: tuple[str, ...]
    checkpoint: str
    latest_size: int
    latest_checkpoint: str | None
    first_seen: str
    last_seen: str
    times: int


class WitnessState:
    """The witness database at ``path``, created (0600) with its tables if missing."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_evidence_per_origin: int = MAX_EVIDENCE_PER_ORIGIN,
        max_evidence_total: int = MAX_EVIDENCE_TOTAL,
    ) -> None:
        self.path = Path(path)
        self.max_evidence_per_origin = max_evidence_per_origin
        self.max_evidence_total = max_evidence_total
        self._local = threading.local()
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            make_private(self.path)
        except OSError as error:
            message = f"{self.path}: cannot make a private database file: {error.strerror}"
            raise WitnessStateError(message) from error
        with self._transaction() as connection:
            self._create_schema(connection)

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            try:
                connection = sqlite3.connect(
                    self.path,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=BUSY_TIMEOUT_SECONDS,
                )
                connection.execute("PRAGMA journal_mode = WAL")
                connection.execute("PRAGMA synchronous = FULL")
            except sqlite3.Error as error:
                raise WitnessStateError(
                    f"{self.path}: cannot open the database: {first_line(error)}"
                ) from error
            self._local.connection = connection
        return connection

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction holding SQLite's write lock from its first statement."""
        connection = self._connection()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
                connection.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise WitnessStateError(f"{self.path}: {first_line(error)}") from error

    def _create_schema(self, connection: sqlite3.Connection) -> None:
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise WitnessStateError(
                f"{self.path} has witness schema {version}, newer than this gnau's "
                f"{SCHEMA_VERSION}: use a newer gnau"
            )
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if "log_head" in tables:
            raise WitnessStateError(
                f"{self.path} is a dealer's database: a witness needs its own database file"
            )
        for statement in SCHEMA:
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    # --- The one write --------------------------------------------------------------------------

    def add_checkpoint(
        self,
        signed: SignedCheckpoint,
        old_size: int,
        proof: Sequence[bytes],
        signer: WitnessSigner,
        now: datetime,
    ) -> NoteSignature | Refused:
        """Cosign and record ``signed`` if it extends the latest cosigned checkpoint, else
        record the refusal as evidence and return it. One transaction: see the module doc.

        The cosignature's time is ``now`` in whole seconds, but never earlier than the previous
        cosignature for the log, so a clock stepping back cannot make a larger tree look older.
        """
        new = signed.checkpoint
        received = str(signed.note)
        with self._transaction() as connection:
            row = connection.execute(
                "SELECT size, root_hash, checkpoint, cosigned_at FROM witness_checkpoints "
                "WHERE origin = ?",
                (new.origin,),
            ).fetchone()
            latest = Checkpoint(new.origin, int(row[0]), bytes(row[1])) if row else None
            verdict = judge(latest, old_size, proof, new)
            if verdict is None:
                timestamp = max(int(now.timestamp()), row[3] if row else 0)
                cosignature = cosign(signer, new.to_note_text(), timestamp)
                connection.execute(
                    "INSERT INTO witness_checkpoints (origin, size, root_hash, checkpoint, "
                    "cosignature, cosigned_at) VALUES (?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (origin) DO UPDATE SET size = excluded.size, "
                    "root_hash = excluded.root_hash, checkpoint = excluded.checkpoint, "
                    "cosignature = excluded.cosignature, cosigned_at = excluded.cosigned_at",
                    (
                        new.origin,
                        str(new.size),
                        new.root_hash,
                        received,
                        cosignature.line,
                        timestamp,
                    ),
                )
                return cosignature
            self._record_evidence(
                connection,
                signed,
                old_size=old_size,
                proof=proof,
                verdict=verdict,
                latest_row=row,
                now=now,
            )
            return verdict

    def _record_evidence(
        self,
        connection: sqlite3.Connection,
        signed: SignedCheckpoint,
        *,
        old_size: int,
        proof: Sequence[bytes],
        verdict: Refused,
        latest_row: Any,
        now: datetime,
    ) -> None:
        """Store (or count again) the refusal of ``signed``, keyed by what it proves.

        Only the note's text and its signatures by the log's trusted keys are kept (every such
        signature verified, or the note was refused before): junk signature lines and padding
        collapse onto one row. A fork (``root_mismatch``) is keyed by that note alone and never
        deleted; other refusals are capped per log and in total, oldest deleted first.
        """
        trusted = {(verifier.name, verifier.key_id) for verifier in signed.signed_by}
        note = signed.note
        kept = "".join(s.line for s in note.signatures if (s.name, s.key_id) in trusted)
        canonical = note.text + "\n" + kept
        fork = verdict.refusal is Refusal.ROOT_MISMATCH
        if fork:
            old_text, proof_text = "", ""
        elif verdict.refusal is Refusal.INCONSISTENT:
            old_text = str(old_size)
            proof_text = "\n".join(encode_base64(node) for node in proof)
        else:
            old_text, proof_text = str(old_size), ""
        digest = hashlib.sha256(
            "\x00".join((verdict.refusal, old_text, proof_text, canonical)).encode()
        ).digest()
        seen = format_utc_timestamp(now.astimezone(UTC))
        origin = signed.checkpoint.origin
        connection.execute(
            "INSERT INTO witness_evidence (digest, origin, refusal, status, reason, "
            "old_size, proof, checkpoint, latest_size, latest_checkpoint, first_seen, "
            "last_seen, times) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) "
            "ON CONFLICT (digest) DO UPDATE SET last_seen = excluded.last_seen, "
            "times = times + 1",
            (
                digest,
                origin,
                verdict.refusal.value,
                verdict.status,
                verdict.reason,
                str(old_size),
                proof_text,
                canonical,
                str(verdict.latest_size),
                latest_row[2] if latest_row else None,
                seen,
                seen,
            ),
        )
        if not fork:
            self._bound_evidence(connection, origin)

    def _bound_evidence(self, connection: sqlite3.Connection, origin: str) -> None:
        """Delete the oldest non-fork rows beyond the caps (``inconsistent`` ones last)."""
        for scope, cap in ((origin, self.max_evidence_per_origin), (None, self.max_evidence_total)):
            count = connection.execute(
                "SELECT count(*) FROM witness_evidence "
                "WHERE (?1 IS NULL OR origin = ?1) AND refusal != 'root_mismatch'",
                (scope,),
            ).fetchone()[0]
            if count > cap:
                connection.execute(
                    "DELETE FROM witness_evidence WHERE id IN (SELECT id FROM witness_evidence "
                    "WHERE (?1 IS NULL OR origin = ?1) AND refusal != 'root_mismatch' "
                    "ORDER BY refusal = 'inconsistent', id LIMIT ?2)",
                    (scope, count - cap),
                )

    # --- Reading --------------------------------------------------------------------------------

    def latest(self, origin: str) -> Latest | None:
        row = self._read(
            "SELECT size, root_hash, checkpoint, cosignature, cosigned_at "
            "FROM witness_checkpoints WHERE origin = ?",
            (origin,),
        )
        if not row:
            return None
        size, root, note, cosignature, cosigned_at = row[0]
        return Latest(Checkpoint(origin, int(size), bytes(root)), note, cosignature, cosigned_at)

    def evidence(self, origin: str | None = None, refusal: Refusal | None = None) -> list[Evidence]:
        """The evidence recorded, oldest first, optionally for one log or one kind of refusal."""
        rows = self._read(
            "SELECT id, origin, refusal, status, reason, old_size, proof, checkpoint, "
            "latest_size, latest_checkpoint, first_seen, last_seen, times FROM witness_evidence "
            "WHERE (?1 IS NULL OR origin = ?1) AND (?2 IS NULL OR refusal = ?2) ORDER BY id",
            (origin, refusal.value if refusal else None),
        )
        return [
            Evidence(
                id=row[0],
                origin=row[1],
                refusal=Refusal(row[2]),
                status=row[3],
                reason=row[4],
                old_size=int(row[5]),
                proof=tuple(row[6].split("\n")) if row[6] else (),
                checkpoint=row[7],
                latest_size=int(row[8]),
                latest_checkpoint=row[9],
                first_seen=row[10],
                last_seen=row[11],
                times=row[12],
            )
            for row in rows
        ]

    def _read(self, query: str, parameters: tuple[object, ...]) -> list[Any]:
        try:
            return self._connection().execute(query, parameters).fetchall()
        except sqlite3.Error as error:
            raise WitnessStateError(f"{self.path}: {first_line(error)}") from error
