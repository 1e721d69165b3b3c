"""A round's log entries: their payloads, the round they publish, their replay (docs/audit.md,
Rounds in the log, Fairness versions in the log, One form in the log, The disclosed return to
player, Every rejection: Round replay)."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from tests.independent.common import (
    VerificationError,
    check,
    is_int,
    is_lower_hex,
    read_hex,
    utf8,
)
from tests.independent.entries import CONTROL, ROUND_KINDS, Entry, canonical
from tests.independent.fairness import (
    FORMAT_OF,
    Round,
    check_round,
    commitment,
    read_round,
    read_rules,
)
from tests.independent.rules import settle

#: The members each payload always has; of the others only these may be present: the actor and
#: the operator (entries from before them name none), and what came later to each event.
EXACT = {
    "ROUND_COMMITTED": {"table_id", "house_rules", "commitment"},
    "ROUND_DEALT": {"seats", "beacon", "transcript_hash", "hands", "dealer_hand"},
    "ROUND_REVEALED": {"server_seed", "deck"},
}
#: Who acted, and whose round it is: in any round payload, and in none of the round's fields.
WHO = {"actor", "operator"}
OPTIONAL = {
    "ROUND_COMMITTED": WHO | {"return_to_player", "fairness_version", "table_version", "currency"},
    "ROUND_DEALT": WHO | {"software"},
    "ROUND_REVEALED": WHO,
}
#: The operator of a round that names none (logged before operators).
DEFAULT_OPERATOR = "default"
#: A void's closed list of reason codes (docs/audit.md, ROUND_VOIDED); the last is the
#: service's own, for a shuffled round its deal deadline passed.
REASON_CODES = (
    "PLATFORM_FAILURE",
    "STAKE_REJECTED",
    "GAME_MALFUNCTION",
    "TABLE_CLOSED",
    "REGULATOR_ORDER",
    "DEAL_DEADLINE_PASSED",
)
DEADLINE = "DEAL_DEADLINE_PASSED"
VOID_STATES = ("SHUFFLED", "DEALT", "REVEALED")
LEGACY_VOID = {"reason", "state", "server_seed"}
VOID = LEGACY_VOID | {"reason_code"}
VOID_AFTER_DEAL = VOID | {"result", "paid"}
AFTER_THE_DEAL = (
    "a void after the deal must settle every seat at the better of its result and a refund"
)
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
    """1 without ``fairness_version``, 2 or 3 with that integer; nothing else is valid."""
    if "fairness_version" not in committed:
        return 1
    version = committed["fairness_version"]
    check(
        is_int(version) and version in {2, 3}, "fairness_version is the integer 2 or 3, or absent"
    )
    return int(version)


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


CURRENCY_CODE = re.compile(r"[A-Z]{3}")


def check_table_played(committed: dict[str, Any]) -> None:
    """docs/audit.md, *Tables and currency*: ``table_version`` and ``currency`` together or
    neither; a positive integer, and exactly ``code`` (three capital letters) and ``exponent``
    (an integer, 0 to 4)."""
    given = {"table_version", "currency"} & set(committed)
    if not given:
        return
    check(len(given) == 2, "table_version and currency come together, or neither")
    check(
        is_int(committed["table_version"]) and committed["table_version"] >= 1,
        "table_version is a positive integer",
    )
    currency = committed["currency"]
    check(
        isinstance(currency, dict)
        and set(currency) == {"code", "exponent"}
        and isinstance(currency["code"], str)
        and CURRENCY_CODE.fullmatch(currency["code"]) is not None
        and is_int(currency["exponent"])
        and 0 <= currency["exponent"] <= 4,
        "currency is a code of three capital letters and an exponent of 0 to 4",
    )


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
        check_table_played(payload)
        read_rules(payload["house_rules"], every_rule=True)
    if kind == "ROUND_DEALT":
        seats = payload["seats"]
        check(isinstance(seats, list), "seats is not an array")
        for i, seat in enumerate(seats):
            check(not isinstance(seat, dict) or "client_seed" in seat, f"seats[{i}].client_seed")
        if "software" in payload:
            check_software(payload["software"])


def check_software(software: object) -> None:
    """The software that dealt the round, as SERVICE_STARTED names it: name, version, sha256."""
    members = {"name", "version", "sha256"}
    check(isinstance(software, dict) and set(software) == members, "software's members")
    assert isinstance(software, dict)
    check(
        all(isinstance(software[k], str) and software[k] for k in ("name", "version")),
        "software's name and version are not non-empty strings",
    )
    check(is_lower_hex(software["sha256"], 64), "software.sha256 is not 64 lower-case hex digits")


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


def check_void(round_id: str, entries: list[Entry], revealed: Round | None) -> None:
    """The round's last entry, a ROUND_VOIDED, against the entries before it: its seed gives the
    commitment; before the deal it settles nothing; after the deal it follows the reveal and
    pays every seat the better of its result and a refund of its stake (docs/audit.md)."""
    void, previous = entries[-1].payload, entries[-2]
    check(void.get("state") in VOID_STATES, "a void's state is not SHUFFLED, DEALT or REVEALED")
    check(isinstance(void.get("server_seed"), str), "a void reveals its server_seed")
    seed = read_hex(void["server_seed"], "server_seed", size=32)
    committed = entries[0].payload
    rules = read_rules(committed["house_rules"])
    expected = commitment(round_id, rules, seed, fairness_version(committed))
    given = read_hex(committed["commitment"], "commitment", size=32)
    check(expected == given, "the seed the void reveals does not give the commitment")
    before_deal = previous.kind == "ROUND_COMMITTED"
    if "reason_code" not in void:  # the form of voids before reason codes: before the deal only
        check(before_deal, AFTER_THE_DEAL)
        check(set(void) - WHO == LEGACY_VOID, f"a void carries exactly {sorted(LEGACY_VOID)}")
        check(isinstance(void["reason"], str) and void["reason"], "a void needs a non-empty reason")
        check(void["state"] == "SHUFFLED", "a void before the deal is of a SHUFFLED round")
        return
    state = void["state"]
    members = VOID if state == "SHUFFLED" else VOID_AFTER_DEAL
    check(set(void) - WHO == members, f"a void of a {state} round carries {sorted(members)}")
    code, reason = void["reason_code"], void["reason"]
    check(code in REASON_CODES, f"{code!r:.60} is not a reason code")
    check(isinstance(reason, str), "a void's reason is not a string")
    check(len(utf8(reason, "reason")) <= 1024, "a void's reason is over 1024 bytes")
    check(not CONTROL.search(reason), "a void's reason holds a control character")
    if code == DEADLINE:
        check(state == "SHUFFLED", f"{DEADLINE} voids only a SHUFFLED round")
        check(void.get("actor", "service") == "service", f"only the service voids for {DEADLINE}")
    if state == "SHUFFLED":
        check(before_deal, "a void of a SHUFFLED round follows its ROUND_COMMITTED")
        return
    check(previous.kind == "ROUND_REVEALED", "a void after the deal follows the round's reveal")
    revealed_seed = read_hex(previous.payload["server_seed"], "server_seed", size=32)
    check(seed == revealed_seed, "the void's seed is not the revealed seed")
    assert revealed is not None  # read at the reveal
    result = settle(
        revealed["house_rules"], revealed["seats"], revealed["hands"], revealed["dealer_hand"]
    )
    check(
        canonical(void["result"]) == canonical(result),
        "the void's result is not the settlement of the hands",
    )
    players = [
        {"seat": p["seat"], "stake": p["stake"], "delta": max(p["delta"], 0)}
        for p in result["players"]
    ]
    paid = {"dealer_delta": -sum(p["delta"] for p in players), "players": players}
    check(canonical(void["paid"]) == canonical(paid), AFTER_THE_DEAL)


def check_one_operator(entries: list[Entry]) -> None:
    """Every entry of a round names the same operator, or none does (docs/audit.md, The
    operator); each one named is an operator id (read_entry checked it)."""
    named = [e.payload.get("operator") for e in entries]
    check(
        all(operator == named[0] for operator in named),
        f"the round's entries name the operators {named!r:.200}: all one, or none",
    )


def check_settlement(r: Round, payload: dict[str, Any]) -> None:
    ours = settle(r["house_rules"], r["seats"], r["hands"], r["dealer_hand"])
    logged = {k: v for k, v in payload.items() if k not in WHO}  # the settlement, and who
    check(canonical(ours) == canonical(logged), "the settlement is not the rules' settlement")


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
        check_one_operator(entries)
        self.entries[round_id] = entries
        payload = entry.payload
        if entry.kind == "ROUND_COMMITTED":
            # One unfinished round per table of each operator: two operators' tables may share
            # an id.
            operator = payload.get("operator", DEFAULT_OPERATOR)
            table = canonical([operator, payload["table_id"]])
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
            check_void(round_id, entries, self.rounds.get(round_id))
        if entry.kind in ("ROUND_SETTLED", "ROUND_VOIDED"):
            del self.open_at_table[self.table_of[round_id]]

    def summary(self) -> dict[str, int]:
        ends = [entries[-1].kind for entries in self.entries.values()]
        settled, voided = ends.count("ROUND_SETTLED"), ends.count("ROUND_VOIDED")
        return {"settled": settled, "voided": voided, "open": len(ends) - settled - voided}
