"""The page's rules module against the service's rules: the same evaluations and settlements,
field for field, over random hands, tables and house rules (every rule that changes a result).

The receipts in the browser tests cover a few hands; this covers the rest of the rules' corners
(3s and 6s, Nenku, Five Small, duplicates from several decks, ties), with the Python rules core
as the independent reference and ``node`` running the page's own ES module.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from gnau_service.rules.cards import parse_cards, standard_deck
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule
from gnau_service.rules.settlement import PlayerHand, settle
from tests.web.nodejs import run_module_script

# make test-system: the page's JavaScript, run by Node.js.
pytestmark = pytest.mark.system

RULES_MODULE = Path(__file__).parents[2] / "gnau_service" / "web" / "js" / "rules.js"
TABLES = 1500
#: (ten_is_duke, three_six_pair, trips_make_ox, five_small): each flag both ways, in four sets
#: rather than all sixteen, since the rules core builds a table for each (half a second apiece).
EVALUATION_RULES = [
    (False, False, True, True),
    (True, True, False, False),
    (True, False, True, False),
    (False, True, False, True),
]

SETTLE_ALL = """
import { settle } from %s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const tables = JSON.parse(input);
const results = tables.map(({ dealer, players, rules }) => settle(dealer, players, rules).json);
process.stdout.write(JSON.stringify(results));
"""


def random_tables(
    seed: int,
) -> list[tuple[HouseRules, list[str], list[tuple[int, list[str], int]]]]:
    rng = random.Random(seed)
    tables = []
    for _ in range(TABLES):
        ten_is_duke, three_six_pair, trips_make_ox, five_small = rng.choice(EVALUATION_RULES)
        rules = HouseRules(
            ten_is_duke=ten_is_duke,
            three_six_pair=three_six_pair,
            trips_make_ox=trips_make_ox,
            five_small=five_small,
            tie=rng.choice(list(TieRule)),
            payout=rng.choice(list(PayoutTable)),
            suited_double=rng.random() < 0.5,
            decks=rng.choice([1, 1, 2, 8]),
        )
        # Now and then only low cards, or only tens and faces, so that 3s, 6s, Five Small,
        # Five Dukes and pairs come up often.
        deck = [str(card) for card in standard_deck(rules.decks)]
        draw = rng.random()
        if draw < 0.3:
            deck = [card for card in deck if card[0] in "A23456"]
        elif draw < 0.45:
            deck = [card for card in deck if card[0] in "TJQK"]
        seats = rng.randint(1, min(3, len(deck) // 5 - 1))
        cards = rng.sample(deck, 5 * (seats + 1))
        players = [
            (number * 2 + 1, cards[5 * number + 5 : 5 * number + 10], rng.randint(1, 10**6))
            for number in range(seats)
        ]
        tables.append((rules, cards[:5], players))
    return tables


def test_the_page_settles_as_the_rules_core_does() -> None:
    tables = random_tables(seed=20261130)
    expected = [
        settle(
            parse_cards(dealer),
            [PlayerHand(seat, parse_cards(hand), stake) for seat, hand, stake in players],
            rules,
        ).to_json()
        for rules, dealer, players in tables
    ]
    request = [
        {
            "rules": rules.as_dict(),
            "dealer": dealer,
            "players": [
                {"seat": seat, "cards": hand, "stake": stake} for seat, hand, stake in players
            ],
        }
        for rules, dealer, players in tables
    ]
    script = SETTLE_ALL % json.dumps(RULES_MODULE.as_uri())
    got = run_module_script(script, request)
    assert len(got) == len(expected)
    for number, (ours, theirs) in enumerate(zip(got, expected, strict=True)):
        assert ours == theirs, (number, request[number])
    # The sample reaches the rules' corners, or it proves little.
    categories = {player["category"] for table in expected for player in table["players"]}
    assert categories == {
        "NO_OX",
        "SINGLE_OX",
        "DOUBLE_OX",
        "NGAU_TONKU",
        "FIVE_SMALL",
        "FIVE_DUKES",
    }
    assert any(player["nenku"] for table in expected for player in table["players"])
    assert {player["outcome"] for table in expected for player in table["players"]} == {
        "WIN",
        "LOSE",
        "TIE",
    }
