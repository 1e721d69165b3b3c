"""Evaluation and settlement, as the log writes them (docs/rules.md; the evaluation's members and
its description: docs/audit.md, Rounds in the log, and docs/schemas/payload-round-settled;
the readings' deterministic choices: docs/rules.md and docs/receipts.md, Verifying by hand)."""

from __future__ import annotations

from itertools import combinations, product
from typing import Any

Rules = dict[str, Any]
Json = dict[str, Any]

CATEGORIES = ("NO_OX", "SINGLE_OX", "DOUBLE_OX", "NGAU_TONKU", "FIVE_SMALL", "FIVE_DUKES")
PAYOUTS = {"points": (0, 1, 2, 5, 10, 10), "multiplier": (0, 1, 3, 5, 7, 7)}
NGAU_TONKU, FIVE_SMALL, FIVE_DUKES = 24, 25, 26
RANK_NAMES = {1: "A", 11: "J", 12: "Q", 13: "K"}
SUIT_ORDER = "DCHS"  # high_card: spades > hearts > clubs > diamonds


def face(card: str) -> int:
    return "A23456789TJQK".index(card[0]) + 1


def ox_points(card: str) -> int:
    return min(face(card), 10)


def category_of(strength: int) -> int:
    if strength == 0:
        return 0
    if strength <= 10:
        return 1
    if strength <= 23:
        return 2
    return strength - NGAU_TONKU + 3


def _ox(hand: list[str], ox: tuple[int, ...], rules: Rules) -> dict[int, int] | None:
    """Points of an ox's three cards, or None if they make no ox: a multiple of 10 with as few
    3s and 6s as possible counted as 6, real 6s first; else three of a rank, at face value."""
    flexible = sorted((i for i in ox if face(hand[i]) in (3, 6)), key=lambda i: -face(hand[i]))
    fixed = sum(ox_points(hand[i]) for i in ox if i not in flexible)
    for sixes in range(len(flexible) + 1):
        if (fixed + 3 * len(flexible) + 3 * sixes) % 10 == 0:
            points = {i: ox_points(hand[i]) for i in ox}
            points |= {i: 6 if k < sixes else 3 for k, i in enumerate(flexible)}
            return points
    if rules["trips_make_ox"] and len({face(hand[i]) for i in ox}) == 1:
        return {i: ox_points(hand[i]) for i in ox}
    return None


def _power(a: str, b: str, rules: Rules, dukes: set[int]) -> tuple[int, bool, tuple[int, int]]:
    """(strength, nenku, points) of two power cards."""
    faces = (face(a), face(b))
    ace_duke = (faces[0] == 1 and faces[1] in dukes) or (faces[1] == 1 and faces[0] in dukes)
    if ace_duke:  # Ngau Tonku with the Ace of Spades, else a Nenku: a marked Single-Ox 1
        points = (ox_points(a), ox_points(b))
        return (NGAU_TONKU, False, points) if "AS" in (a, b) else (1, True, points)
    if rules["three_six_pair"] and set(faces) <= {3, 6}:
        return 16, False, (6, 6)
    if faces[0] == faces[1]:
        return 10 + faces[0], False, (ox_points(a), ox_points(b))
    options = [
        (3, 6) if f in (3, 6) else (ox_points(c),) for f, c in zip(faces, (a, b), strict=True)
    ]
    best, chosen = -1, (0, 0)
    for first, second in product(*options):
        single = (first + second) % 10 or 10
        if single > best:
            best, chosen = single, (first, second)
    return best, False, chosen


def evaluate(cards: list[str], rules: Rules) -> dict[str, Any]:
    """The evaluation object of the log: cards, category, value, ox, power, points, nenku,
    strength, description."""
    dukes = {11, 12, 13} | ({10} if rules["ten_is_duke"] else set())
    order = sorted(range(5), key=lambda i: 0 if cards[i] == "AS" else face(cards[i]))
    hand = [cards[i] for i in order]
    best_strength, best_nenku = 0, False
    best_points = {i: ox_points(c) for i, c in enumerate(hand)}
    best_ox: tuple[int, ...] = ()
    best_power: tuple[int, ...] = ()
    for ox in combinations(range(5), 3):
        points = _ox(hand, ox, rules)
        if points is None:
            continue
        power = tuple(i for i in range(5) if i not in ox)
        strength, nenku, values = _power(hand[power[0]], hand[power[1]], rules, dukes)
        if (strength, nenku) > (best_strength, best_nenku):
            best_strength, best_nenku = strength, nenku
            best_points = points | dict(zip(power, values, strict=True))
            best_ox, best_power = ox, power
    strength, nenku = best_strength, best_nenku
    if all(face(c) in dukes for c in cards):
        strength, nenku = FIVE_DUKES, False
    elif rules["five_small"] and all(face(c) <= 4 for c in cards):
        strength, nenku = FIVE_SMALL, False
    category = category_of(strength)
    value = strength % 10 if category == 1 else strength - 10 if category == 2 else None
    result = {
        "cards": list(cards),
        "category": CATEGORIES[category],
        "value": value,
        "ox": [cards[i] for i in sorted(order[k] for k in best_ox)],
        "power": [cards[i] for i in sorted(order[k] for k in best_power)],
        "points": [best_points[order.index(i)] for i in range(5)],
        "nenku": nenku,
        "strength": strength,
    }
    return result | {"description": describe(result)}


def describe(result: dict[str, Any]) -> str:
    """One readable line: the result's name, ' (Nenku)', then the five cards (no ox) or the ox
    and power cards, a 3 or 6 followed by the points it counted at."""
    strength, value, cards, points = (result[k] for k in ("strength", "value", "cards", "points"))
    category = CATEGORIES.index(result["category"])
    names = {
        0: "No Ox",
        NGAU_TONKU: "Ngau Tonku",
        FIVE_SMALL: "Five Small",
        FIVE_DUKES: "Five Dukes",
    }
    if strength in names:
        name = names[strength]
    elif category == 1:
        name = f"Single-Ox {value}"
    else:
        name = f"Double-Ox {RANK_NAMES.get(value, str(value))}"
    if result["nenku"]:
        name += " (Nenku)"

    def shown(group: list[str]) -> str:
        # A 3 or 6 shows the points of the first card of the hand equal to it (docs/receipts.md).
        return " ".join(f"{c}({points[cards.index(c)]})" if c[0] in "36" else c for c in group)

    tail = (
        f"ox {shown(result['ox'])}  power {shown(result['power'])}"
        if result["ox"]
        else " ".join(cards)
    )
    return f"{name}  {tail}"


def settle(rules: Rules, seats: list[Json], hands: dict[int, list[str]], dealer: list[str]) -> Json:
    """The ROUND_SETTLED payload: the dealer's evaluation and delta, each seat's in seat order."""
    payout = PAYOUTS[rules["payout"]]
    dealer_result = evaluate(dealer, rules)

    def paid(result: Json) -> int:
        suited = rules["suited_double"] and len({c[1] for c in result["cards"]}) == 1
        return payout[CATEGORIES.index(result["category"])] * (2 if suited else 1)

    def high(result: Json) -> tuple[int, int]:
        return max((face(c), SUIT_ORDER.index(c[1])) for c in result["cards"])

    players = []
    for seat in sorted(seats, key=lambda s: s["seat_number"]):
        result = evaluate(hands[seat["seat_number"]], rules)
        mine, theirs = result["strength"], dealer_result["strength"]
        if mine == theirs == FIVE_DUKES:
            outcome = "TIE"
        elif mine != theirs:
            outcome = "WIN" if mine > theirs else "LOSE"
        elif rules["tie"] == "push":
            outcome = "TIE"
        elif rules["tie"] == "high_card" and high(result) > high(dealer_result):
            outcome = "WIN"
        else:
            outcome = "LOSE"
        stake = seat["stake"]
        delta = {"WIN": stake * paid(result), "LOSE": -stake * paid(dealer_result), "TIE": 0}
        players.append(
            {"seat": seat["seat_number"], **result, "stake": stake, "outcome": outcome}
            | {"delta": delta[outcome]}
        )
    return {
        "dealer": {**dealer_result, "delta": -sum(p["delta"] for p in players)},
        "players": players,
    }
