"""A bundle of the HTTP port's tiles shows no hand before its round does (docs/privacy.md): 403
while a round with an entry in it is dealt and not revealed, a refusal that names no card, hand,
seat or round; served once the round is revealed; and the hash tile of the same entries served,
byte for byte the same, all the while."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from gnau.v1 import dealer_pb2, round_pb2

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.note import SignedNote
from tests.web.conftest import SEATS, WebService

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: A card as the log writes it: rank, then suit.
CARD = re.compile(r"\b[A2-9TJQK][SHDC]\b")


async def size_now(service: WebService) -> int:
    status, _, body = await service.log("checkpoint")
    assert status == 200
    return Checkpoint.parse(SignedNote.parse(body.decode()).text).size


async def test_a_bundle_shows_no_hand_before_its_round_does(web_service: WebService) -> None:
    await web_service.play()  # a settled round first: its entries share the bundle
    settled = await size_now(web_service)
    shuffled = await web_service.call(
        "Shuffle", dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id="table-1")
    )
    round_id = shuffled.round.round_id
    dealt = await web_service.call(
        "Deal", dealer_pb2.DealRequest(request_id=str(uuid.uuid4()), round_id=round_id, seats=SEATS)
    )
    size = await size_now(web_service)
    assert size > settled
    cards = {*dealt.round.dealer_hand, *(card for hand in dealt.round.hands for card in hand.cards)}
    refs = {seat.player_ref for seat in dealt.round.seats}
    assert len(cards) == 5 * (1 + len(SEATS)) and all(refs)
    hash_tile = f"tile/0/000.p/{size}"
    status, _, hashes_before = await web_service.log(hash_tile)
    assert status == 200 and len(hashes_before) == 32 * size

    # Every width that takes in an entry of the dealt round is refused, and says nothing of it.
    for width in range(settled + 1, size + 1):
        status, headers, body = await web_service.log(f"tile/entries/000.p/{width}")
        assert (status, headers["Cache-Control"]) == (403, "no-store"), width
        assert headers["Content-Type"].startswith("application/json")
        refusal = json.loads(body)
        assert set(refusal) == {"error", "reason"} and refusal["error"] == "PERMISSION_DENIED"
        text = body.decode()
        assert round_id not in text and not CARD.search(text), text
        assert not any(ref in text for ref in refs) and "cards" not in text
    # The bundle of the settled round alone is public, and so is every hash tile.
    assert (await web_service.log(f"tile/entries/000.p/{settled}"))[0] == 200

    await web_service.call(
        "Reveal", dealer_pb2.RevealRequest(request_id=str(uuid.uuid4()), round_id=round_id)
    )
    status, _, bundle = await web_service.log(f"tile/entries/000.p/{size}")
    assert status == 200
    assert round_id.encode() in bundle and all(card.encode() in bundle for card in cards)
    status, _, hashes_after = await web_service.log(hash_tile)
    assert (status, hashes_after) == (200, hashes_before)
    await web_service.call(
        "Settle", dealer_pb2.SettleRequest(request_id=str(uuid.uuid4()), round_id=round_id)
    )
    assert (await web_service.log(hash_tile))[2] == hashes_before


async def test_a_voided_round_makes_its_bundle_public(web_service: WebService) -> None:
    shuffled = await web_service.call(
        "Shuffle", dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id="table-2")
    )
    round_id = shuffled.round.round_id
    await web_service.call(
        "Deal",
        dealer_pb2.DealRequest(request_id=str(uuid.uuid4()), round_id=round_id, seats=SEATS),
    )
    size = await size_now(web_service)
    assert (await web_service.log(f"tile/entries/000.p/{size}"))[0] == 403
    await web_service.call(
        "VoidRound",
        dealer_pb2.VoidRoundRequest(
            request_id=str(uuid.uuid4()),
            round_id=round_id,
            reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
            reason="test",
        ),
    )
    assert (await web_service.log(f"tile/entries/000.p/{size}"))[0] == 200
