"""A round's log entries: their payloads, the round they publish, their replay (docs/audit.md,
Rounds in the log, Fairness versions in the log, One form in the log, The disclosed return to
player, Every rejection: Round replay)."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from tests.independent.common import VerificationError, check, is_int, read_hex
from tests.independent.entries import ROUND_KINDS, Entry, canonical
from tests.independent.fairness import (
    FORMAT_OF,
    Round,
    check_round,
    commitment,
    read_round,
    read_rules,
)
from tests.independent.rules import settle

#: The members each payload always has; of the others only these may be present.
EXACT = {
    "ROUND_COMMITTED": {"table_id", "house_rules", "commitment"},
    "ROUND_DEALT": {"seats", "beacon", "transcript_hash", "hands", "dealer_hand"},
    "ROUND_REVEALED": {"server_seed", "deck"},
}
OPTIONAL = {"ROUND_COMMITTED": {"return_to_player", "fairness_version"}}
#: What may come after what in one round's life.
AFTER: dict[str | None, tuple[str, ...]] = {
    None: ("ROUND_COMMITTED",),
    "ROUND_COMMITTED": ("ROUND_DEALT", "ROUND_VOIDED"),
    "ROUND_DEALT": ("ROUND_REVEALED", "ROUND_VOIDED"),
    "ROUND_REVEALED": ("ROUND_SETTLED", "ROUND_VOIDED"),
    "ROUND_SETTLED": (),
    "ROUND_VOIDED": (),
}
FRACTION = re.compile(r"-?(0|[1-9][0-9]*)/[1-9][0-9]*")


def fairness_version(committed: dict[str, Any]) -> int:
    """1 without ``fairness_version``, 2 with the integer 2; nothing else is valid."""
    if "fairness_version" not in committed:
        return 1
    version = committed["fairness_version"]
    check(is_int(version) and version == 2, "fairness_version is the integer 2, or absent")
    return 2


def six_places(x: Fraction) -> str:
    """Rounded to 6 places, to nearest, ties to even; a minus sign only when negative."""
    millionths = round(x * 10**6)  # Python rounds a Fraction half to even
    sign = "-" if millionths < 0 else ""
    whole, part = divmod(abs(millionths), 10**6)
    return f"{sign}{whole}.{part:06d}"


def check_return_to_player(figures: object) -> None:
    """Four strings that agree: exact fractions in lowest terms summing to 1, and decimals
    that are them rounded to 6 places."""
    names = {"rtp", "house_edge", "rtp_decimal", "house_edge_decimal"}
    check(isinstance(figures, dict) and set(figures) == names, "return_to_player's members")
    assert isinstance(figures, dict)
    check(all(isinstance(v, str) for v in figures.values()), "return_to_player holds strings")
    exact = []
    for name in ("rtp", "house_edge"):
        text = figures[name]
        check(FRACTION.fullmatch(text), f"return_to_player.{name} is not a fraction")
        value = Fraction(text)
        check(f"{value.numerator}/{value.denominator}" == text, f"{name} is not in lowest terms")
        exact.append(value)
        check(six_places(value) == figures[f"{name}_decimal"], f"{name}_decimal is not {name}")
    check(sum(exact) == 1, "rtp and house_edge do not sum to 1")


def check_payload(entry: Entry) -> None:
    """The members of a round payload, in the log's one form."""
    kind, payload = entry.kind, entry.payload
    if kind in EXACT:
        extra = set(payload) - EXACT[kind] - OPTIONAL.get(kind, set())
        missing = EXACT[kind] - set(payload)
        check(not extra and not missing, f"{kind} must carry exactly {sorted(EXACT[kind])}")
    if kind == "ROUND_COMMITTED":
        fairness_version(payload)
        if "return_to_player" in payload:
            check_return_to_player(payload["return_to_player"])
        read_rules(payload["house_rules"], every_rule=True)
    if kind == "ROUND_DEALT":
        seats = payload["seats"]
        check(isinstance(seats, list), "seats is not an array")
        for i, seat in enumerate(seats):
            check(not isinstance(seat, dict) or "client_seed" in seat, f"seats[{i}].client_seed")


def published(round_id: str, entries: list[Entry], deck: object = None) -> dict[str, Any]:
    """The revealed round the log's entries publish, in the format of the committed version;
    ``deck`` where the log holds none (a void before its reveal)."""
    by_kind = {e.kind: e.payload for e in entries}
    committed, dealt = by_kind["ROUND_COMMITTED"], by_kind["ROUND_DEALT"]
    seed_from = by_kind.get("ROUND_VOIDED") or by_kind["ROUND_REVEALED"]  # merged in log order
    return {
        "format": FORMAT_OF[fairness_version(committed)],
        "round_id": round_id,
        "house_rules": committed["house_rules"],
        "commitment": committed["commitment"],
        **{k: dealt[k] for k in EXACT["ROUND_DEALT"]},
        "server_seed": seed_from["server_seed"],
        "deck": by_kind["ROUND_REVEALED"]["deck"] if "ROUND_REVEALED" in by_kind else deck,
    }


def check_void(round_id: str, committed: dict[str, Any], void: dict[str, Any]) -> None:
    reason = void.get("reason")
    check(isinstance(reason, str) and reason, "a void needs a non-empty reason")
    check(isinstance(void.get("server_seed"), str), "a void reveals its server_seed")
    seed = read_hex(void["server_seed"], "server_seed", size=32)
    rules = read_rules(committed["house_rules"])
    expected = commitment(round_id, rules, seed, fairness_version(committed))
    given = read_hex(committed["commitment"], "commitment", size=32)
    check(expected == given, "the seed the void reveals does not give the commitment")


def check_settlement(r: Round, payload: dict[str, Any]) -> None:
    ours = settle(r["house_rules"], r["seats"], r["hands"], r["dealer_hand"])
    check(canonical(ours) == canonical(payload), "the settlement is not the rules' settlement")


class Replay:
    """Every round of a log, entry by entry, in log order. A log that starts mid-way (at
    ``first_index`` > 0) checks only the rounds whose commitment it holds."""

    def __init__(self, first_index: int) -> None:
        self.mid_log = first_index > 0
        self.entries: dict[str, list[Entry]] = {}
        self.unchecked: set[str] = set()
        self.rounds: dict[str, Round] = {}
        self.open_at_table: dict[bytes, str] = {}
        self.table_of: dict[str, bytes] = {}

    def feed(self, entry: Entry) -> None:
        if entry.kind not in ROUND_KINDS:
            return
        round_id = entry.round_id
        assert round_id is not None
        try:
            self._feed(round_id, entry)
        except VerificationError as error:
            raise VerificationError(f"round {round_id}: {error}") from None

    def _feed(self, round_id: str, entry: Entry) -> None:
        if round_id in self.unchecked:
            check(entry.kind != "ROUND_COMMITTED", "a second ROUND_COMMITTED")
            return
        seen = self.entries.get(round_id)
        if seen is None and entry.kind != "ROUND_COMMITTED" and self.mid_log:
            self.unchecked.add(round_id)  # committed before the log's first entry
            return
        last = seen[-1].kind if seen else None
        check(entry.kind in AFTER[last], f"{entry.kind} after {last or 'nothing'}")
        check_payload(entry)
        entries = [*(seen or []), entry]
        self.entries[round_id] = entries
        payload = entry.payload
        if entry.kind == "ROUND_COMMITTED":
            table = canonical(payload["table_id"])
            other = self.open_at_table.get(table)
            check(other is None, f"its table's round {other} is neither settled nor voided")
            self.open_at_table[table], self.table_of[round_id] = round_id, table
        elif entry.kind == "ROUND_REVEALED":
            r = read_round(published(round_id, entries))
            check_round(r)
            self.rounds[round_id] = r
        elif entry.kind == "ROUND_SETTLED":
            check_settlement(self.rounds[round_id], payload)
        elif entry.kind == "ROUND_VOIDED":
            check_void(round_id, entries[0].payload, payload)
        if entry.kind in ("ROUND_SETTLED", "ROUND_VOIDED"):
            del self.open_at_table[self.table_of[round_id]]

    def summary(self) -> dict[str, int]:
        ends = [entries[-1].kind for entries in self.entries.values()]
        settled, voided = ends.count("ROUND_SETTLED"), ends.count("ROUND_VOIDED")
        return {"settled": settled, "voided": voided, "open": len(ends) - settled - voided}
