"""Round receipts from a real service: who may fetch them, what they prove, and every kind of
tampering caught at its own step (docs/receipts.md)."""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gnau.v1 import dealer_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.entries import decode_entry, encode_entry
from gnau_service.audit.note import SignedNote
from gnau_service.audit.receipts import (
    Receipt,
    ReceiptFormatError,
    ReceiptReport,
    Step,
    verify_receipt,
)
from gnau_service.audit.signing import LogSigner
from gnau_service.cli.main import main as gnau_main
from gnau_service.fairness.reveal import RevealedRound
from gnau_service.fairness.round import CommittedRound
from tests.server.conftest import Service
from tests.server.test_service import deal, details, play, refusal, shuffle, void

Document = dict[str, Any]
#: The tables this module's tests deal at besides the starter tables, each catalogued (issue 38).
TABLES = (
    "receipt-early",
    "receipt-void-1",
    "receipt-void-2",
    "receipt-reveal",
    "pin-1",
    "pin-2",
    "pin-3",
    "rotation",
    "after-rotation",
    "round-get-open",
)


#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = TABLES


def rid() -> str:
    return str(uuid.uuid4())


async def receipt_of(
    service: Service, round_id: str, *, role: str | None = None, pinned_size: int = 0
) -> Document:
    answer = await service.call(
        "dealer",
        "GetRoundReceipt",
        dealer_pb2.GetRoundReceiptRequest(round_id=round_id, pinned_size=pinned_size),
        role=role,
    )
    document: Document = json.loads(answer.receipt)
    return document


def verify(service: Service, document: Document, pinned: str | None = None) -> ReceiptReport:
    return verify_receipt(
        Receipt.from_json(copy.deepcopy(document)), [service.app.store.signer.verifier], pinned
    )


async def checkpoint_text(service: Service) -> str:
    return await asyncio.to_thread(service.app.store.checkpoint) or ""


def size_of(note: str) -> int:
    return Checkpoint.parse(SignedNote.parse(note).text).size


# -- what a receipt proves ---------------------------------------------------------------------


async def test_a_settled_rounds_receipt_is_public_and_valid(service: Service) -> None:
    settled = await play(service)
    document = await receipt_of(service, settled.round_id)  # no token: the public role
    report = verify(service, document)
    assert report.ok, report.summary()
    assert report.passed == [
        Step.FAIRNESS,
        Step.ENTRIES,
        Step.ROUND,
        Step.OUTCOME,
        Step.CHECKPOINT,
        Step.INCLUSION,
    ]
    assert report.state == "settled"
    assert [entry["index"] for entry in document["entries"]] == list(settled.log_indices)
    assert document["round"]["server_seed"] == settled.server_seed
    assert document["round"]["deck"] == list(settled.deck)


async def test_a_round_has_no_receipt_before_its_seed_is_public(service: Service) -> None:
    shuffled = await shuffle(service, "receipt-early")
    to_public = await refusal(receipt_of(service, shuffled.round_id))
    assert to_public.code() == grpc.StatusCode.NOT_FOUND
    to_operator = await refusal(receipt_of(service, shuffled.round_id, role="operator"))
    assert to_operator.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert details(to_operator)[1] == "ROUND_STATE"


async def test_revealed_and_voided_rounds_have_receipts(service: Service) -> None:
    voided_early = await shuffle(service, "receipt-void-1")
    await void(service, voided_early.round_id, "x")
    early = await receipt_of(service, voided_early.round_id)
    assert early["round"] is None
    assert verify(service, early).state == "voided"

    dealt = await shuffle(service, "receipt-void-2")
    await deal(service, dealt.round_id)
    await void(service, dealt.round_id, "power")
    late = await receipt_of(service, dealt.round_id)
    assert late["round"] is not None and len(late["round"]["deck"]) == 52
    report = verify(service, late)
    assert report.ok and report.state == "voided", report.summary()

    revealed = await shuffle(service, "receipt-reveal")
    await deal(service, revealed.round_id)
    await service.call(
        "dealer",
        "Reveal",
        dealer_pb2.RevealRequest(request_id=rid(), round_id=revealed.round_id),
    )
    report = verify(service, await receipt_of(service, revealed.round_id))
    assert report.ok and report.state == "revealed", report.summary()


async def test_a_pinned_checkpoint_is_proved_consistent(service: Service) -> None:
    first = await play(service, "pin-1")
    pin = await checkpoint_text(service)
    await play(service, "pin-2")
    later = await receipt_of(service, first.round_id, pinned_size=size_of(pin))
    assert later["consistency"]["first_size"] == size_of(pin)
    report = verify(service, later, pinned=pin)
    assert report.ok and report.pinned_size == size_of(pin), report.summary()
    # Without the proof from the pin's size, the pin cannot be checked: not a failure (nothing
    # is wrong with the round), but not valid either.
    plain = await receipt_of(service, first.round_id)
    lacking = verify(service, plain, pinned=pin)
    assert lacking.failure is None and not lacking.ok
    assert lacking.unchecked is not None and lacking.unchecked.step is Step.CONSISTENCY
    assert "CANNOT CHECK step consistency" in lacking.summary()
    assert "INVALID" not in lacking.summary()
    # A pin newer than the receipt: fetch the receipt again.
    await play(service, "pin-3")
    newer = await checkpoint_text(service)
    stale = verify(service, later, pinned=newer)
    assert stale.failure is None and stale.unchecked is not None
    assert stale.unchecked.step is Step.CONSISTENCY and "newer" in stale.unchecked.reason
    # The same round fetched again proves it against the newer checkpoint.
    assert verify(service, await receipt_of(service, first.round_id), pinned=newer).ok


async def test_a_pinned_size_beyond_the_log_is_out_of_range(service: Service) -> None:
    settled = await play(service)
    error = await refusal(receipt_of(service, settled.round_id, pinned_size=10**9))
    assert error.code() == grpc.StatusCode.OUT_OF_RANGE


async def test_a_round_from_before_a_key_rotation_verifies_from_the_old_key(
    service: Service,
) -> None:
    settled = await play(service, "rotation")
    old = service.app.store.signer
    new = LogSigner.from_private_key(old.origin, Ed25519PrivateKey.generate())
    await asyncio.to_thread(service.app.store.rotate_key, new)
    await play(service, "rotation")  # a checkpoint signed by the new key
    document = await receipt_of(service, settled.round_id)
    assert len(document["key_rotations"]) == 1
    report = verify_receipt(Receipt.from_json(document), [old.verifier])
    assert report.ok, report.summary()
    # Pinned to the new key alone, the old entries are not trusted: pin the round's key.
    failed = verify_receipt(Receipt.from_json(document), [new.verifier]).failure
    assert failed is not None and failed.step is Step.ENTRIES


async def test_a_retired_key_signs_nothing_after_its_rotation(service: Service) -> None:
    old = service.app.store.signer
    new = LogSigner.from_private_key(old.origin, Ed25519PrivateKey.generate())
    await asyncio.to_thread(service.app.store.rotate_key, new)
    settled = await play(service, "after-rotation")
    document = await receipt_of(service, settled.round_id)
    assert verify_receipt(Receipt.from_json(copy.deepcopy(document)), [old.verifier]).ok
    # The retired key, stolen, re-signs the round's deal as it stands (same time, same bytes
    # but the key): the signature verifies, but the key was no longer the log's at that time.
    dealt = decode_entry(document["entries"][1]["entry"].encode(), new.verifier)
    forged = encode_entry(
        old.signer,
        index=dealt.index,
        kind=dealt.kind,
        time=dealt.time,
        payload=dealt.payload,
        prev_hash=dealt.prev_hash,
        round_id=dealt.round_id,
    )
    document["entries"][1]["entry"] = forged.decode()
    failure = verify_receipt(Receipt.from_json(document), [old.verifier]).failure
    assert failure is not None and failure.step is Step.ENTRIES
    assert "was not the log's key at" in failure.reason


# -- tampering, each caught at its own step -------------------------------------------------------


def _flip_hex(text: str, position: int) -> str:
    digit = text[position]
    return text[:position] + ("0" if digit != "0" else "1") + text[position + 1 :]


def _card(document: Document) -> None:
    hand = document["round"]["hands"][0]["cards"]
    hand[0] = "KS" if hand[0] != "KS" else "QS"


def _stake(document: Document) -> None:
    document["round"]["seats"][0]["stake"] += 1


def _client_seed(document: Document) -> None:
    seat = document["round"]["seats"][0]
    seat["client_seed"] = "fe" if seat["client_seed"] == "ff" else "ff"


def _seed(document: Document) -> None:
    document["round"]["server_seed"] = _flip_hex(document["round"]["server_seed"], 0)


def _signature(document: Document) -> None:
    entry = document["entries"][1]["entry"]
    position = entry.index('"signature":"') + len('"signature":"') + 10
    document["entries"][1]["entry"] = _flip_hex(entry, position)


def _proof_hash(document: Document) -> None:
    proof = document["entries"][0]["inclusion_proof"]
    proof[0] = _flip_hex(proof[0], 5)


def _checkpoint_line(document: Document) -> None:
    origin, size, root, *rest = document["checkpoint"].split("\n")
    document["checkpoint"] = "\n".join([origin, str(int(size) + 1), root, *rest])


def _entry_dropped(document: Document) -> None:
    del document["entries"][1]  # the deal: the reveal no longer follows the commitment


def _entry_index(document: Document) -> None:
    document["entries"][2]["index"] += 1


def _entries_swapped(document: Document) -> None:
    entries = document["entries"]
    entries[1], entries[2] = entries[2], entries[1]


def _another_fair_round(document: Document) -> None:
    # What only the operator could forge (it knows how seeds are drawn): a round that is fair
    # under the same id, but not the one the log published.
    published = RevealedRound.from_json(document["round"])
    forged = CommittedRound(published.round_id, published.rules, bytes(32), published.version)
    document["round"] = forged.lock(published.seats, published.beacon).deal().reveal().to_json()


def _round_dropped(document: Document) -> None:
    document["round"] = None


def _foreign_checkpoint(document: Document) -> None:
    signer = LogSigner.from_private_key("gnau-dealer/local", Ed25519PrivateKey.generate())
    checkpoint = Checkpoint.parse(SignedNote.parse(document["checkpoint"]).text)
    document["checkpoint"] = str(signer.sign_checkpoint(checkpoint.size, checkpoint.root_hash))


TAMPERED: list[tuple[str, Callable[[Document], None], Step, str]] = [
    ("a card", _card, Step.FAIRNESS, "hand of seat"),
    # A v3 lock does not hash the stakes: the signed ROUND_DEALT entry binds them (step round).
    ("a stake", _stake, Step.ROUND, "seats differs from what the log"),
    ("a client seed", _client_seed, Step.FAIRNESS, "lock"),
    ("the seed", _seed, Step.FAIRNESS, "commitment"),
    ("a signature", _signature, Step.ENTRIES, "signature"),
    ("a proof hash", _proof_hash, Step.INCLUSION, "not in the checkpoint's tree"),
    ("a checkpoint line", _checkpoint_line, Step.CHECKPOINT, "signature"),
    ("an entry dropped", _entry_dropped, Step.ENTRIES, "ROUND_REVEALED after ROUND_COMMITTED"),
    ("an entry's index", _entry_index, Step.ENTRIES, "listed as"),
    ("entries swapped", _entries_swapped, Step.ENTRIES, "ROUND_REVEALED after ROUND_COMMITTED"),
    ("another fair round", _another_fair_round, Step.ROUND, "differs from what the log"),
    ("the round dropped", _round_dropped, Step.ROUND, "the receipt has no round"),
    (
        "a checkpoint by another key",
        _foreign_checkpoint,
        Step.CHECKPOINT,
        "no signature from a known key",
    ),
]


@pytest.mark.parametrize(
    ("tamper", "step", "reason"),
    [(tamper, step, reason) for _, tamper, step, reason in TAMPERED],
    ids=[name for name, *_ in TAMPERED],
)
async def test_each_tampering_fails_at_its_step(
    service: Service, tamper: Callable[[Document], None], step: Step, reason: str
) -> None:
    settled = await play(service)
    document = await receipt_of(service, settled.round_id)
    assert verify(service, document).ok
    tamper(document)
    failure = verify(service, document).failure
    assert failure is not None
    assert (failure.step, reason in failure.reason) == (step, True), str(failure)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"format": "gnau-dealer/round-receipt/v2"}',
        '{"format": "gnau-dealer/round-receipt/v1", "round_id": "r"}',
    ],
)
def test_what_is_not_a_receipt_is_unreadable(text: str) -> None:
    with pytest.raises(ReceiptFormatError):
        Receipt.from_text(text)


async def test_malformed_members_are_unreadable(service: Service) -> None:
    settled = await play(service)
    document = await receipt_of(service, settled.round_id)
    for mutate in (
        lambda d: d.update(extra=1),
        lambda d: d["entries"][0]["inclusion_proof"].append("zz" * 32),
        lambda d: d["entries"][0].update(index=True),
        lambda d: d.update(entries=d["entries"] * 2),
        lambda d: d.update(entries=[]),
        lambda d: d.update(consistency={"first_size": 1}),
        lambda d: d.update(key_rotations=[1]),
    ):
        broken = copy.deepcopy(document)
        mutate(broken)
        with pytest.raises(ReceiptFormatError):
            Receipt.from_json(broken)
    duplicated = json.dumps(document)[:-1] + ', "round_id": "r-other"}'
    with pytest.raises(ReceiptFormatError, match="twice"):
        Receipt.from_text(duplicated)


@pytest.fixture
async def served_receipt(service: Service) -> tuple[Service, str]:
    settled = await play(service)
    answer = await service.call(
        "dealer", "GetRoundReceipt", dealer_pb2.GetRoundReceiptRequest(round_id=settled.round_id)
    )
    return service, str(answer.receipt)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damaged_receipts_are_unreadable_or_invalid_never_a_crash(
    served_receipt: tuple[Service, str], data: st.DataObject
) -> None:
    service, text = served_receipt
    raw = bytearray(text.encode())
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] = data.draw(st.integers(0, 255))
    try:
        receipt = Receipt.from_text(bytes(raw))
    except ReceiptFormatError:
        return
    report = verify_receipt(receipt, [service.app.store.signer.verifier])
    if report.ok:
        # A change that still verifies means the same: white space, or the case of a hex digit.
        assert json.dumps(json.loads(bytes(raw))).lower() == json.dumps(json.loads(text)).lower()
    else:
        assert report.failure is not None and str(report.failure)


# -- the commands ------------------------------------------------------------------------------


async def test_the_player_path_on_the_command_line(
    service: Service, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settled = await play(service)
    target = f"127.0.0.1:{service.app.port}"
    vkey = service.app.store.signer.vkey
    out = tmp_path / "receipt.json"

    def gnau(*args: str) -> int:
        return gnau_main(list(args))

    assert (
        await asyncio.to_thread(
            gnau, "receipt", "get", settled.round_id, "--target", target, "--out", str(out)
        )
        == 0
    )
    assert await asyncio.to_thread(gnau, "receipt", "verify", str(out), "--key", vkey) == 0
    assert "VALID (settled)" in capsys.readouterr().out
    document = json.loads(out.read_text())
    _seed(document)
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(document))
    assert await asyncio.to_thread(gnau, "receipt", "verify", str(tampered), "--key", vkey) == 1
    assert "INVALID at step fairness: commitment" in capsys.readouterr().out
    tampered.write_text("{")
    assert await asyncio.to_thread(gnau, "receipt", "verify", str(tampered), "--key", vkey) == 2
    missing = await asyncio.to_thread(
        gnau, "receipt", "get", "r-nope", "--target", target, "--out", str(out)
    )
    assert missing == 2 and "NOT_FOUND" in capsys.readouterr().err


async def test_round_get_json_is_what_round_verify_reads(
    service: Service, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settled = await play(service)
    target = f"127.0.0.1:{service.app.port}"
    capsys.readouterr()
    status = await asyncio.to_thread(
        gnau_main, ["round", "get", settled.round_id, "--target", target, "--json"]
    )
    assert status == 0
    revealed = tmp_path / "round.json"
    revealed.write_text(capsys.readouterr().out)
    assert json.loads(revealed.read_text())["format"] == "gnau-dealer/revealed-round/v3"
    assert await asyncio.to_thread(gnau_main, ["round", "verify", str(revealed)]) == 0
    open_round = await shuffle(service, "round-get-open")
    status = await asyncio.to_thread(
        gnau_main,
        ["round", "get", open_round.round_id, "--target", target, "--json", "--token", "op-token"],
    )
    assert status == 2 and "not revealed yet" in capsys.readouterr().err
