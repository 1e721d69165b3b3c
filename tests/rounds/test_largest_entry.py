"""The largest entries a real round and a real table change can log (issue 40): every field at
its limit (docs/api.md, *Limits*), 82 seats, eight decks, the longest rule set, a table approving
64 rule sets. Each must fit a C2SP tlog-tiles bundle, whose entry length is a 16-bit number, and
an event whose entry could not is refused when its step commits, before the log signs anything.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path

import pytest

from gnau_service.audit.entries import EntryError, EntryKind, decode_entry, event_payload
from gnau_service.audit.round_events import VoidReason
from gnau_service.rounds.catalogue import Catalogue, TableConfig
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.requests import SeatRequest
from gnau_service.rules.currency import Currency
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule, every_rule_set
from tests.dealers import fresh, opened_store

#: A tile bundle's length prefix is a big-endian uint16 (c2sp.org/tlog-tiles).
BUNDLE_ENTRY_LIMIT = 65_535
OPERATOR = "o" * 64
ACTOR = "token:" + "a" * 64
TABLE = "é" * 64  # 128 bytes of UTF-8, the longest table id
#: The longest rule set when written out: every option on, the widest enums, eight decks.
LONGEST = HouseRules(
    ten_is_duke=True, three_six_pair=True, trips_make_ox=True, five_small=True,
    tie=TieRule.HIGH_CARD, payout=PayoutTable.MULTIPLIER, suited_double=True, decks=8,
)  # fmt: skip
SEATS = [
    SeatRequest(2**31 - 1 - n, "é" * 64, 5_492_194_667, client_seed=bytes(range(64)))
    for n in range(82)
]


def largest_entries(directory: Path, void: bool) -> dict[str, int]:
    """The size of the largest entry of each kind, after a round of 82 seats and a table of 64
    rule sets with every field at its limit, settled or voided after the deal."""
    with opened_store("sqlite", directory) as store:
        dealer, catalogue = Dealer(store), Catalogue(store)
        rule_sets = (LONGEST, *itertools.islice(
            (rules for rules in every_rule_set() if rules != LONGEST), 63
        ))  # fmt: skip
        config = TableConfig(Currency("EUR", 2), rule_sets, max_stake=10**10, max_seats=82)

        async def play() -> None:
            await catalogue.add_table(OPERATOR, TABLE, config, actor=ACTOR)
            view = await dealer.shuffle(TABLE, LONGEST, fresh(), operator=OPERATOR, actor=ACTOR)
            round_id = view.record.round_id
            beacon = ("é" * 64, bytes(1024))
            await dealer.deal(round_id, SEATS, beacon, fresh(), operator=OPERATOR, actor=ACTOR)
            if void:
                reason = "é" * 512  # 1024 bytes of UTF-8
                await dealer.void(
                    round_id, VoidReason.GAME_MALFUNCTION, reason, fresh(),
                    operator=OPERATOR, actor=ACTOR,
                )  # fmt: skip
            else:
                await dealer.reveal(round_id, fresh(), operator=OPERATOR, actor=ACTOR)
                await dealer.settle(round_id, fresh(), operator=OPERATOR, actor=ACTOR)

        asyncio.run(play())
        sizes: dict[str, int] = {}
        for data in store.iter_entries():
            kind = str(decode_entry(data, store.signer.verifier).kind)
            sizes[kind] = max(sizes.get(kind, 0), len(data))
        return sizes


@pytest.mark.parametrize("void", [False, True], ids=["settled", "voided"])
def test_the_largest_real_entries_fit_a_tile_bundle(tmp_path: Path, void: bool) -> None:
    sizes = largest_entries(tmp_path, void)
    kinds = {"TABLE_CHANGED", "ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED"}
    assert kinds | ({"ROUND_VOIDED"} if void else {"ROUND_SETTLED"}) <= set(sizes)
    # Half the limit at most: a later field or a longer name must not reach it unnoticed.
    assert max(sizes.values()) < BUNDLE_ENTRY_LIMIT // 2, sizes
    # docs/audit.md quotes them, to within the few hundred bytes the cards dealt move them.
    doc = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text()
    quoted = re.search(
        r"is a `ROUND_VOIDED` of about ([\d,]+) bytes; the largest `ROUND_DEALT` is\s+"
        r"about ([\d,]+), `ROUND_SETTLED` ([\d,]+) and `TABLE_CHANGED` ([\d,]+)",
        doc,
    )
    assert quoted is not None
    in_doc = dict(
        zip(
            ["ROUND_VOIDED", "ROUND_DEALT", "ROUND_SETTLED", "TABLE_CHANGED"],
            (int(n.replace(",", "")) for n in quoted.groups()),
            strict=True,
        )
    )
    for kind, size in sizes.items():
        if kind in in_doc:
            assert abs(in_doc[kind] - size) <= size * 0.05, (kind, size, in_doc[kind])


def test_an_event_whose_entry_would_not_fit_is_refused_when_committed() -> None:
    time = "2026-12-06T00:00:00Z"
    # An entry's members around its payload, at their widest (docs/audit.md, *Entries*).
    envelope = len(
        '{"index":9007199254740991,"key_id":"' + "0" * 8 + '","kind":"CONFIG_CHANGED",'
        '"payload":,"prev_hash":"' + "0" * 64 + '","round_id":null,'
        '"signature":"' + "0" * 128 + '","time":"' + time + '"}'
    )
    most = BUNDLE_ENTRY_LIMIT - envelope - len('{"x":""}')  # the longest string that fits
    assert event_payload(EntryKind.CONFIG_CHANGED, {"x": "a" * most}, time=time).endswith(b'a"}')
    with pytest.raises(EntryError, match="more than the 65535 a log entry may take"):
        event_payload(EntryKind.CONFIG_CHANGED, {"x": "a" * (most + 1)}, time=time)
