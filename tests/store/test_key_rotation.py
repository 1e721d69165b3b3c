"""Several stores on one log, one of which rotates the key: nobody signs with a retired key.

Each store stands for a process (a server replica, ``gnau key rotate``): they share nothing but
the database, as processes do."""

from __future__ import annotations

import asyncio

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.entries import EntryError, EntryKind, decode_entry
from gnau_service.audit.note import SignedNote
from gnau_service.audit.signing import LogSigner
from gnau_service.store import KeyNotCurrent, StoreUnavailable, open_store
from tests.steps import append, run_step


def fresh(signer: LogSigner) -> LogSigner:
    return LogSigner.from_private_key(signer.origin, Ed25519PrivateKey.generate())


def test_a_store_whose_key_was_rotated_elsewhere_signs_nothing(
    database_url: str, signer: LogSigner
) -> None:
    new = fresh(signer)
    with open_store(database_url, signer) as rotator, open_store(database_url, signer) as stale:
        append(stale, EntryKind.CONFIG_CHANGED, {"before": True})
        rotator.rotate_key(new)
        size = rotator.size()
        with pytest.raises(KeyNotCurrent) as refused:
            append(stale, EntryKind.CONFIG_CHANGED, {"after": True})
        assert isinstance(refused.value, StoreUnavailable)  # a retryable refusal at the edge
        assert refused.value.held == signer.vkey and refused.value.current == new.vkey
        assert rotator.size() == size  # nothing of the refused batch was written
        append(rotator, EntryKind.CONFIG_CHANGED, {"by": "new key"})
        with pytest.raises(KeyNotCurrent):  # and it stays refused: no silent fallback
            run_step(stale, lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {}))
        last = rotator.entries(0, rotator.size())[-1]
        assert decode_entry(last, new.verifier).key_id == new.key_id.hex()


def test_a_store_refused_from_an_event_loop_too(database_url: str, signer: LogSigner) -> None:
    new = fresh(signer)

    async def append_from_a_loop() -> None:
        await stale.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {}))

    with open_store(database_url, signer) as rotator, open_store(database_url, signer) as stale:
        rotator.rotate_key(new)
        with pytest.raises(KeyNotCurrent):
            asyncio.run(append_from_a_loop())


def test_a_store_with_a_key_source_takes_up_the_current_key(
    database_url: str, signer: LogSigner
) -> None:
    new = fresh(signer)
    asked: list[str] = []

    def key_source(wanted: str) -> LogSigner | None:
        asked.append(wanted)
        return new if wanted == new.vkey else None

    with (
        open_store(database_url, signer) as rotator,
        open_store(database_url, signer, key_source) as follower,
    ):
        append(follower, EntryKind.CONFIG_CHANGED, {"n": 1})
        assert asked == []  # its key is current: the source is not even asked
        rotator.rotate_key(new)
        entry = append(follower, EntryKind.CONFIG_CHANGED, {"n": 2})
        assert asked == [new.vkey]
        assert follower.signer == new
        data = follower.entries(entry.index, entry.index + 1)[0]
        assert decode_entry(data, new.verifier).key_id == new.key_id.hex()
        with pytest.raises(EntryError):
            decode_entry(data, signer.verifier)
        assert SignedNote.parse(follower.checkpoint() or "").verify([new.verifier])


def test_a_key_source_that_has_only_a_wrong_key_is_refused(
    database_url: str, signer: LogSigner
) -> None:
    new, wrong = fresh(signer), fresh(signer)
    with (
        open_store(database_url, signer) as rotator,
        open_store(database_url, signer, lambda wanted: wrong) as follower,
    ):
        rotator.rotate_key(new)
        with pytest.raises(KeyNotCurrent):
            append(follower, EntryKind.CONFIG_CHANGED, {})
        assert follower.signer == signer


def test_a_key_that_never_signed_for_the_log_is_neither_registered_nor_used(
    database_url: str, signer: LogSigner
) -> None:
    stranger = fresh(signer)
    with open_store(database_url, signer) as first:
        append(first, EntryKind.CONFIG_CHANGED, {})
    with open_store(database_url, stranger) as other:
        assert other.public_keys() == [signer.vkey]
        assert other.current_key() == signer.vkey
        with pytest.raises(KeyNotCurrent):
            append(other, EntryKind.CONFIG_CHANGED, {})


def test_the_current_key_follows_each_rotation(database_url: str, signer: LogSigner) -> None:
    keys = [signer, fresh(signer), fresh(signer)]
    with open_store(database_url, signer) as store:
        assert store.current_key() == signer.vkey
        for new in keys[1:]:
            store.rotate_key(new)
            assert store.current_key() == new.vkey
        assert store.public_keys() == [key.vkey for key in keys]


def test_the_rotation_entry_names_the_console_as_its_actor(
    database_url: str, signer: LogSigner
) -> None:
    """Only `gnau key rotate` rotates, on the host with no credential: the entry says so, beside
    the rotation note the readers take."""
    new = fresh(signer)
    with open_store(database_url, signer) as rotator:
        entry = rotator.rotate_key(new)
        rotated = decode_entry(rotator.entries(entry.index, entry.index + 1)[0], signer.verifier)
    assert rotated.kind is EntryKind.KEY_ROTATED
    assert set(rotated.payload) == {"rotation", "actor"}
    assert rotated.payload["actor"] == "console"
