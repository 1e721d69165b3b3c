"""Evidence cannot grow without bound from anonymous replays; forks are always kept."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.checkpoint import open_checkpoint
from gnau_service.audit.cosignature import WitnessSigner
from gnau_service.audit.note import NoteSignature, SignedNote, Signer
from gnau_service.witness.state import WitnessState
from gnau_service.witness.verdict import Refusal, Refused
from tests.witnessing import GrowingLog

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def padded(note: SignedNote, n: int, lines: int = 90) -> bytes:
    """``note`` with ``lines`` junk signature lines by unknown keys, distinct for each ``n``."""
    junk = Signer(f"junk.example/{n}", Ed25519PrivateKey.generate())
    extra = tuple(
        NoteSignature(junk.name, junk.key_id, bytes([n % 256, i % 256]) * 300) for i in range(lines)
    )
    return SignedNote(note.text, (*note.signatures, *extra)).encode()


def cosigned(
    tmp_path: Path, origin: str = "gnau-dealer/witness-test", **caps: int
) -> tuple[GrowingLog, WitnessState, WitnessSigner]:
    log = GrowingLog.new(origin, size=5)
    state = WitnessState(tmp_path / "witness.db", **caps)
    signer = WitnessSigner.generate("witness.example/w1")
    signed = open_checkpoint(log.checkpoint().encode(), log.origin, [log.signer.verifier])
    assert isinstance(state.add_checkpoint(signed, 0, (), signer, NOW), NoteSignature)
    return log, state, signer


def db_bytes(state: WitnessState) -> int:
    """The database's size once its write-ahead log is folded in (the last close does that)."""
    state.close()
    return sum(p.stat().st_size for p in state.path.parent.glob(state.path.name + "*"))


def test_junk_signature_replays_of_a_valid_checkpoint_collapse_onto_one_row(
    tmp_path: Path,
) -> None:
    log, state, signer = cosigned(tmp_path)
    before = db_bytes(state)
    for n in range(60):
        body = padded(log.checkpoint(), n)
        assert len(body) > 50_000
        signed = open_checkpoint(body, log.origin, [log.signer.verifier])
        refused = state.add_checkpoint(signed, 1, (), signer, NOW)
        assert isinstance(refused, Refused) and refused.refusal is Refusal.OLD_SIZE_MISMATCH
    assert db_bytes(state) - before < 100 * 1024
    (row,) = state.evidence()
    assert row.times == 60
    # What is kept is the log's signed note, without the junk, and it still verifies.
    assert row.checkpoint == str(log.checkpoint())
    assert SignedNote.parse(row.checkpoint).verify([log.signer.verifier])


def test_non_fork_rows_are_capped_per_origin_and_in_total(tmp_path: Path) -> None:
    log, state, signer = cosigned(tmp_path, max_evidence_per_origin=5, max_evidence_total=7)
    other, _, _ = cosigned(tmp_path / "other", "gnau-dealer/other")
    state_other_log = open_checkpoint(
        other.checkpoint().encode(), other.origin, [other.signer.verifier]
    )
    assert isinstance(state.add_checkpoint(state_other_log, 0, (), signer, NOW), NoteSignature)
    signed = open_checkpoint(log.checkpoint().encode(), log.origin, [log.signer.verifier])
    for old in range(6, 26):  # 20 distinct stale `old` sizes: old_size_too_large rows
        state.add_checkpoint(signed, old, (), signer, NOW)
    rows = state.evidence(log.origin)
    assert [r.old_size for r in rows] == [21, 22, 23, 24, 25]  # the newest five
    signed_other = open_checkpoint(
        other.checkpoint().encode(), other.origin, [other.signer.verifier]
    )
    for old in range(1, 5):
        state.add_checkpoint(signed_other, old, (), signer, NOW)
    assert len(state.evidence()) == 7
    assert [r.old_size for r in state.evidence(other.origin)] == [1, 2, 3, 4]
    # 5 + 4 = 9 rows, 2 over the total cap: the two oldest (21, 22) go.
    assert [r.old_size for r in state.evidence(log.origin)] == [23, 24, 25]


def test_a_fork_is_kept_when_the_cap_is_full(tmp_path: Path) -> None:
    log, state, signer = cosigned(tmp_path, max_evidence_per_origin=3, max_evidence_total=3)
    signed = open_checkpoint(log.checkpoint().encode(), log.origin, [log.signer.verifier])
    fork = log.fork(at=2).grow(3)  # size 5 too, same key, other root
    assert fork.tree.root(5) != log.tree.root(5)
    forked = open_checkpoint(fork.checkpoint().encode(), fork.origin, [fork.signer.verifier])
    for old in range(6, 10):
        state.add_checkpoint(signed, old, (), signer, NOW)
    refused = state.add_checkpoint(forked, 5, (), signer, NOW)
    assert isinstance(refused, Refused) and refused.refusal is Refusal.ROOT_MISMATCH
    for old in range(10, 30):
        state.add_checkpoint(signed, old, (), signer, NOW)
    (kept,) = state.evidence(refusal=Refusal.ROOT_MISMATCH)
    assert kept.checkpoint == str(fork.checkpoint())
    assert kept.latest_checkpoint == str(log.checkpoint())
    assert len(state.evidence(refusal=Refusal.OLD_SIZE_TOO_LARGE)) == 3


def test_a_database_made_before_the_caps_opens_and_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "witness.db"
    old_schema = (
        "CREATE TABLE witness_checkpoints (origin TEXT PRIMARY KEY, size TEXT NOT NULL, "
        "root_hash BLOB NOT NULL, checkpoint TEXT NOT NULL, cosignature TEXT NOT NULL, "
        "cosigned_at INTEGER NOT NULL);"
        "CREATE TABLE witness_evidence (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "digest BLOB NOT NULL UNIQUE, origin TEXT NOT NULL, refusal TEXT NOT NULL, "
        "status INTEGER NOT NULL, reason TEXT NOT NULL, old_size TEXT NOT NULL, "
        "proof TEXT NOT NULL, checkpoint TEXT NOT NULL, latest_size TEXT NOT NULL, "
        "latest_checkpoint TEXT, first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, "
        "times INTEGER NOT NULL);"
        "PRAGMA user_version = 1;"
    )
    with sqlite3.connect(path) as connection:
        connection.executescript(old_schema)
    log = GrowingLog.new(size=5)
    state = WitnessState(path, max_evidence_per_origin=2)
    signer = WitnessSigner.generate("witness.example/w1")
    signed = open_checkpoint(log.checkpoint().encode(), log.origin, [log.signer.verifier])
    assert isinstance(state.add_checkpoint(signed, 0, (), signer, NOW), NoteSignature)
    for old in range(1, 5):
        state.add_checkpoint(signed, old, (), signer, NOW)
    assert [r.old_size for r in state.evidence()] == [3, 4]
