"""Real outputs of a real service: rounds played through the gRPC API on an in-process service
(SQLite or PostgreSQL), their receipts from ``GetRoundReceipt``, the rounds as ``GetRound``
gives them, and a bundle exported from the service's store.

The rounds cover every payload kind the service writes: settled rounds (default house rules; and
two decks, every non-default rule, client seeds and a beacon), a round voided before its deal,
one voided after its deal and one after its reveal, and a key rotation (``Store.rotate_key``)
followed by another settled round. Those are fairness v3 rounds, as the service shuffles every
round now; the stories named ``v1_*`` are fairness v1 rounds and those named ``v2_*`` fairness v2
rounds (in each, a settled one, one voided before its deal and one after), shuffled as a gnau
before player references (v1), or before stakes left the shuffle's input (v2), shuffled them
(:func:`shuffling_rounds_of`) and played on by today's service, which still deals, reveals,
settles, voids and serves such rounds.
"""

from __future__ import annotations

import asyncio
import io
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gnau.v1 import dealer_pb2, round_pb2, types_pb2

from gnau_service.audit.actors import CONSOLE
from gnau_service.audit.bundle import write_bundle
from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.note import SignedNote
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.audit.signing import LogSigner
from gnau_service.fairness.commitment import new_server_seed
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.round import CommittedRound
from gnau_service.rounds.catalogue import Catalogue, OperatorConfig, RtpBand
from gnau_service.rules.house_rules import HouseRules
from gnau_service.server.grpc.convert import house_rules_from_proto, revealed_round_from_proto
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from tests.catalogued import catalogue
from tests.server.conftest import Service

SEATS = [
    round_pb2.Seat(seat_number=1, player_id="alice", stake=100, client_seed=b"alice's luck"),
    round_pb2.Seat(seat_number=2, player_id="bob", stake=250),
    round_pb2.Seat(seat_number=5, player_id="zoë", stake=7, client_seed=bytes(64)),
]
BIG_TABLE = [
    round_pb2.Seat(seat_number=n, player_id=f"player-{n}", stake=10 * n, client_seed=bytes([n]))
    for n in (*range(1, 7), *range(8, 14))
]
BEACON = round_pb2.Beacon(label="drand/quicknet/round/12345678", value=bytes(range(32)))
ALL_RULES = types_pb2.HouseRules(
    ten_is_duke=True,
    three_six_pair=True,
    trips_make_ox=False,
    five_small=False,
    tie=types_pb2.TIE_RULE_HIGH_CARD,
    payout=types_pb2.PAYOUT_TABLE_MULTIPLIER,
    suited_double=True,
    decks=2,
)

#: ALL_RULES, as the catalogue approves it.
DOMAIN_ALL_RULES = house_rules_from_proto(ALL_RULES)


@dataclass
class Served:
    """What the service wrote, as text and JSON, and the keys to check it with."""

    backend: str
    #: The log key the service started with: what a verifier pins.
    vkey: str = ""
    #: Receipt texts as GetRoundReceipt served them, by the round's story.
    receipts: dict[str, str] = field(default_factory=dict)
    #: A checkpoint taken before the key rotation, and a receipt fetched with it pinned.
    pin: str = ""
    pinned_receipt: str = ""
    #: ``revealed_round_from_proto(GetRound(...)).to_json()`` of each revealed round.
    rounds: dict[str, dict[str, object]] = field(default_factory=dict)
    #: Each round's ``GetRound`` answer to the public, as the message.
    messages: dict[str, round_pb2.Round] = field(default_factory=dict)
    #: The bundle of the whole log, as ``gnau audit export`` writes it.
    bundle: str = ""
    #: The log's signing keys by key ID (to forge dishonest entries with the real keys).
    signers: dict[str, LogSigner] = field(default_factory=dict)


def _rid() -> str:
    return str(uuid.uuid4())


async def _step(service: Service, method: str, request: object) -> round_pb2.Round:
    response = await service.call("dealer", method, request)
    return response.round  # type: ignore[no-any-return]


async def _shuffle(service: Service, table: str, rules: types_pb2.HouseRules | None = None) -> str:
    request = dealer_pb2.ShuffleRequest(request_id=_rid(), table_id=table, house_rules=rules)
    return (await _step(service, "Shuffle", request)).round_id


async def _deal(
    service: Service,
    round_id: str,
    seats: list[round_pb2.Seat],
    beacon: round_pb2.Beacon | None = None,
) -> None:
    request = dealer_pb2.DealRequest(request_id=_rid(), round_id=round_id, seats=seats)
    if beacon is not None:
        request.beacon.CopyFrom(beacon)
    await _step(service, "Deal", request)


async def _reveal(service: Service, round_id: str) -> None:
    await _step(service, "Reveal", dealer_pb2.RevealRequest(request_id=_rid(), round_id=round_id))


async def _settle(service: Service, round_id: str) -> None:
    await _step(service, "Settle", dealer_pb2.SettleRequest(request_id=_rid(), round_id=round_id))


async def _void(service: Service, round_id: str) -> None:
    request = dealer_pb2.VoidRoundRequest(
        reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
        request_id=_rid(),
        round_id=round_id,
        reason="the shoe was dropped",
    )
    await _step(service, "VoidRound", request)


async def _receipt(service: Service, round_id: str, pinned_size: int = 0) -> str:
    request = dealer_pb2.GetRoundReceiptRequest(round_id=round_id, pinned_size=pinned_size)
    response = await service.call("dealer", "GetRoundReceipt", request, role="public")
    return response.receipt  # type: ignore[no-any-return]


@contextmanager
def shuffling_rounds_of(version: FairnessVersion) -> Iterator[None]:
    """While it lasts, the service's Shuffle commits rounds of an older fairness ``version``, as
    a gnau of that time did: the rest of such a round's life is today's code (a round carries
    its version from its commitment on)."""

    def older(cls: type[CommittedRound], round_id: str, rules: HouseRules) -> CommittedRound:
        return cls(round_id, rules, new_server_seed(), version)

    production = CommittedRound.__dict__["with_fresh_seed"]
    CommittedRound.with_fresh_seed = classmethod(older)  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        CommittedRound.with_fresh_seed = production  # type: ignore[method-assign]


def _size(note: str) -> int:
    return Checkpoint.parse(SignedNote.parse(note).text).size


async def play_everything(settings: Settings, backend: str) -> Served:
    served = Served(backend)
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        service = Service(app, settings, channel)
        store = app.store
        served.vkey = store.signer.vkey
        served.signers[store.signer.key_id.hex()] = store.signer

        # Every catalogue entry kind, and the tables the rounds below are dealt at.
        await catalogue(store, [f"table-{n}" for n in range(1, 10)], HouseRules(), DOMAIN_ALL_RULES)
        shelf = Catalogue(store)
        band = RtpBand(Fraction(1, 2), Fraction(1))
        await shelf.set_operator(
            DEFAULT_OPERATOR, lambda c: OperatorConfig(True, band), actor=CONSOLE
        )
        await shelf.set_gaming(False, actor=CONSOLE)
        await shelf.set_gaming(True, actor=CONSOLE)

        rounds: dict[str, str] = {}
        rounds["settled"] = await _shuffle(service, "table-1")
        await _deal(service, rounds["settled"], SEATS)
        await _reveal(service, rounds["settled"])
        await _settle(service, rounds["settled"])

        rounds["settled_all_rules"] = await _shuffle(service, "table-2", ALL_RULES)
        await _deal(service, rounds["settled_all_rules"], BIG_TABLE, BEACON)
        await _reveal(service, rounds["settled_all_rules"])
        await _settle(service, rounds["settled_all_rules"])

        rounds["voided_shuffled"] = await _shuffle(service, "table-3")
        await _void(service, rounds["voided_shuffled"])

        rounds["voided_dealt"] = await _shuffle(service, "table-4")
        await _deal(service, rounds["voided_dealt"], SEATS, BEACON)
        await _void(service, rounds["voided_dealt"])

        rounds["voided_revealed"] = await _shuffle(service, "table-5")
        await _deal(service, rounds["voided_revealed"], SEATS)
        await _reveal(service, rounds["voided_revealed"])
        await _void(service, rounds["voided_revealed"])

        rounds["revealed"] = await _shuffle(service, "table-6")
        await _deal(service, rounds["revealed"], SEATS[:1])
        await _reveal(service, rounds["revealed"])

        for older in (FairnessVersion.V1, FairnessVersion.V2):
            # Tables 7 to 9 again for each version: the version before has ended its rounds.
            story = f"v{int(older)}_"
            with shuffling_rounds_of(older):
                rounds[story + "settled"] = await _shuffle(service, "table-7")
                rounds[story + "voided_shuffled"] = await _shuffle(service, "table-8")
                rounds[story + "voided_dealt"] = await _shuffle(service, "table-9")
            await _deal(service, rounds[story + "settled"], SEATS, BEACON)
            await _reveal(service, rounds[story + "settled"])
            await _settle(service, rounds[story + "settled"])
            await _void(service, rounds[story + "voided_shuffled"])
            await _deal(service, rounds[story + "voided_dealt"], SEATS)
            await _void(service, rounds[story + "voided_dealt"])

        served.pin = store.checkpoint() or ""
        new = LogSigner.from_private_key(store.signer.origin, Ed25519PrivateKey.generate())
        await asyncio.to_thread(store.rotate_key, new)
        served.signers[new.key_id.hex()] = new

        rounds["settled_after_rotation"] = await _shuffle(service, "table-1")
        await _deal(service, rounds["settled_after_rotation"], SEATS)
        await _reveal(service, rounds["settled_after_rotation"])
        await _settle(service, rounds["settled_after_rotation"])

        for story, round_id in rounds.items():
            served.receipts[story] = await _receipt(service, round_id)
            got = await service.call(
                "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=round_id), role="public"
            )
            served.messages[story] = got.round
            if got.round.seats:
                served.rounds[story] = revealed_round_from_proto(got.round).to_json()
        served.pinned_receipt = await _receipt(service, rounds["settled"], _size(served.pin))

        note = store.checkpoint()
        assert note is not None
        out = io.StringIO(newline="\n")
        await asyncio.to_thread(write_bundle, store, out, end=_size(note))
        served.bundle = out.getvalue()
    return served


def serve_and_play(settings: Settings, backend: str) -> Served:
    """Run the service, play the rounds, collect what it wrote, stop it."""
    return asyncio.run(play_everything(settings, backend))


def settings_for(data_dir: Path, tokens: Path, database: str = "") -> Settings:
    return Settings(
        listen="127.0.0.1:0",
        data_dir=data_dir,
        database=database,
        tokens=tokens,
        grace_seconds=1,
        shutdown_notice_seconds=0,
    )
