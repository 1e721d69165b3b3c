"""The logs of issues 37 and 38, written out by hand from the design: voids with reason codes and
the better-of arithmetic after the deal, actors, a deal's software, the new entry kinds, the
operator of a round and of a forget; and what
every verifier must say of each (the bundle's verdict, and each round's receipt's verdict with
the step that fails). Every reader outside the service runs them: the independent verifiers
(tests/independent/test_voids.py), the docs' receipt script and the web page's code
(tests/web/test_js_voids.py), and the service's own commands beside them.

The round voided after its deal (``A``) has seats 1 and 2 winning 100 and 250 and seat 4
losing 75, the dealer -275; a fair void pays 100, 250 and 0 (a refund), the dealer -350.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.independent.handmade import (
    DEALT_ROUND,
    ORIGIN,
    SHUFFLED_ROUND,
    SOFTWARE,
    VKEY,
    VOID_RESULT,
    Listed,
    Log,
    Payload,
    committed,
    dealt,
    revealed,
    write_log,
)

A, B = DEALT_ROUND["round_id"], SHUFFLED_ROUND["round_id"]
PLATFORM = "token:casino-a-platform"
#: The operator of round A (round B, logged before operators, names none).
OPERATOR = "casino-a"
#: What Settle would have paid, as written in the vector's settlement: 100, 250, -75; -275.
RESULT_DELTAS = ([100, 250, -75], -275)
#: The better of each result and a refund: 100, 250, 0; the dealer minus their sum.
FAIR_PAID: Payload = {
    "dealer_delta": -350,
    "players": [
        {"seat": 1, "stake": 100, "delta": 100},
        {"seat": 2, "stake": 250, "delta": 250},
        {"seat": 4, "stake": 75, "delta": 0},
    ],
}
FAIR_VOID: Payload = {
    "actor": PLATFORM,
    "operator": OPERATOR,
    "reason_code": "PLATFORM_FAILURE",
    "reason": "wallet timeout",
    "state": "REVEALED",
    "server_seed": DEALT_ROUND["server_seed"],
    "result": VOID_RESULT,
    "paid": FAIR_PAID,
}
LEGACY_VOID: Payload = {
    "reason": "the shoe was dropped",
    "state": "SHUFFLED",
    "server_seed": SHUFFLED_ROUND["server_seed"],
}


def story() -> list[Listed]:
    """A log of today's service: a start and its settings, an old round voided before its
    deal (no actor, operator or reason code), a round of an operator voided after its reveal,
    a forget, a change of tokens, a clean stop."""
    actor = {"actor": PLATFORM, "operator": OPERATOR}
    settings = {
        "max_stake": 10**12,
        "deal_deadline_seconds": 600,
        "settle_deadline_seconds": 3600,
        "public_round_listing": False,
    }
    tokens = {
        "added": [
            {"name": "casino-b-platform", "role": "operator", "operator": "casino-b"},
            {"name": "regulator", "role": "auditor", "operator": "*"},
            {"name": "site", "role": "public"},
        ],
        "revoked": [{"name": "casino-b-old", "role": "operator"}],  # logged before operators
    }
    started = {"software": SOFTWARE, "origin": ORIGIN, "key": VKEY}
    return copy.deepcopy(
        [
            ("SERVICE_STARTED", None, {"actor": "service", **started}),
            ("CONFIG_CHANGED", None, {"actor": "service", "settings": settings}),
            ("ROUND_COMMITTED", B, committed(SHUFFLED_ROUND, "table-2")),
            ("ROUND_VOIDED", B, LEGACY_VOID),
            ("ROUND_COMMITTED", A, committed(DEALT_ROUND, "table-1") | actor),
            ("ROUND_DEALT", A, dealt(DEALT_ROUND) | actor | {"software": SOFTWARE}),
            ("ROUND_REVEALED", A, revealed(DEALT_ROUND) | actor),
            ("ROUND_VOIDED", A, FAIR_VOID),
            ("PLAYER_FORGOTTEN", None, {"actor": "console", "operator": OPERATOR}),
            ("TOKENS_CHANGED", None, {"actor": "console", **tokens}),
            ("SERVICE_STOPPED", None, {"actor": "service"}),
        ]
    )


def _at(listed: list[Listed], kind: str, round_id: str | None = None) -> int:
    return next(i for i, (k, r, _) in enumerate(listed) if k == kind and r == round_id)


def find(listed: list[Listed], kind: str, round_id: str | None = None) -> Payload:
    return listed[_at(listed, kind, round_id)][2]


def _replace(listed: list[Listed], kind: str, round_id: str | None, payload: Payload) -> None:
    listed[_at(listed, kind, round_id)] = (kind, round_id, payload)


def _drop(listed: list[Listed], kind: str, round_id: str | None = None) -> None:
    del listed[_at(listed, kind, round_id)]


def _void_a(**changes: Any) -> Callable[[list[Listed]], None]:
    def edit(listed: list[Listed]) -> None:
        find(listed, "ROUND_VOIDED", A).update(copy.deepcopy(changes))

    return edit


def _paid(deltas: list[int], dealer: int) -> Callable[[list[Listed]], None]:
    """The void of A paying these deltas (seats 1, 2, 4) and this dealer delta."""
    players = [{**p, "delta": d} for p, d in zip(FAIR_PAID["players"], deltas, strict=True)]
    return _void_a(paid={"dealer_delta": dealer, "players": players})


def _void_b(payload: Payload) -> Callable[[list[Listed]], None]:
    def edit(listed: list[Listed]) -> None:
        _replace(listed, "ROUND_VOIDED", B, {**payload, "server_seed": LEGACY_VOID["server_seed"]})

    return edit


def _no_actors(listed: list[Listed]) -> None:
    """Every entry as logged before actors; the kinds that came with them always name one."""
    for kind, _, payload in listed:
        if kind not in ("SERVICE_STOPPED", "TOKENS_CHANGED"):
            payload.pop("actor", None)


def _no_operators(listed: list[Listed]) -> None:
    """Every entry as logged before operators."""
    for _, _, payload in listed:
        payload.pop("operator", None)


def _operator(operator: object, round_id: str = A, *kinds: str) -> Callable[[list[Listed]], None]:
    """The round's entries of these kinds (all of them if none is named) naming ``operator``;
    ``None`` removes it."""

    def edit(listed: list[Listed]) -> None:
        for kind, logged_id, payload in listed:
            if logged_id == round_id and (not kinds or kind in kinds):
                payload["operator"] = operator

    return edit


def _one_table_for_two(operator_of_b: str) -> Callable[[list[Listed]], None]:
    """Round B at round A's table, of ``operator_of_b``, and unfinished when A is committed."""

    def edit(listed: list[Listed]) -> None:
        find(listed, "ROUND_COMMITTED", B)["table_id"] = "table-1"
        _operator(operator_of_b, B)(listed)
        void = listed.pop(_at(listed, "ROUND_VOIDED", B))
        listed.insert(_at(listed, "ROUND_COMMITTED", A) + 1, void)

    return edit


def _settled_instead(listed: list[Listed]) -> None:
    settled = {**copy.deepcopy(VOID_RESULT), "actor": PLATFORM, "operator": OPERATOR}
    listed[_at(listed, "ROUND_VOIDED", A)] = ("ROUND_SETTLED", A, settled)


def _without_the_reveal(void: Payload) -> Callable[[list[Listed]], None]:
    def edit(listed: list[Listed]) -> None:
        _drop(listed, "ROUND_REVEALED", A)
        _replace(listed, "ROUND_VOIDED", A, copy.deepcopy(void))

    return edit


def _result_of_another_deal(listed: list[Listed]) -> None:
    """Seat 4 logged as a winner, and paid as one: the arithmetic holds, the hands do not."""
    void = find(listed, "ROUND_VOIDED", A)
    seat = void["result"]["players"][2]
    seat.update(outcome="WIN", delta=75)
    void["result"]["dealer"]["delta"] = -425
    void["paid"]["players"][2]["delta"] = 75
    void["paid"]["dealer_delta"] = -425


def _actor(kind: str, actor: object, round_id: str | None = A) -> Callable[[list[Listed]], None]:
    def edit(listed: list[Listed]) -> None:
        find(listed, kind, round_id)["actor"] = actor

    return edit


def _edit(kind: str, round_id: str | None, **changes: Any) -> Callable[[list[Listed]], None]:
    def edit(listed: list[Listed]) -> None:
        find(listed, kind, round_id).update(copy.deepcopy(changes))

    return edit


def _rename(kind: str, new_kind: str) -> Callable[[list[Listed]], None]:
    def edit(listed: list[Listed]) -> None:
        i = _at(listed, kind)
        listed[i] = (new_kind, *listed[i][1:])

    return edit


def _unchanged(listed: list[Listed]) -> None:
    del listed  # the story as written


VALID, INVALID = "VALID", "INVALID"
OK = (VALID, "")


@dataclass
class Case:
    """A change to the story, the bundle's verdict, and each receipt's verdict and failing
    step, by round (a round left out: its receipt is not in question)."""

    name: str
    edit: Callable[[list[Listed]], None]
    bundle: str
    receipts: dict[str, tuple[str, str]] = field(default_factory=dict)

    def log(self) -> Log:
        listed = story()
        self.edit(listed)
        for _, _, payload in listed:  # a member an edit sets to None is one it removes
            for name in [k for k, v in payload.items() if v is None and k != "beacon"]:
                del payload[name]
        return write_log(listed)


def at_outcome() -> tuple[str, str]:
    return (INVALID, "outcome")


def at_entries() -> tuple[str, str]:
    return (INVALID, "entries")


CASES = [
    # -- valid ----------------------------------------------------------------------------------
    Case("as written", _unchanged, VALID, {A: OK, B: OK}),
    Case("a void asked in DEALT", _void_a(state="DEALT"), VALID, {A: OK}),
    Case("no actor in any entry", _no_actors, VALID, {A: OK, B: OK}),
    Case(
        "a void with its code before the deal",
        _void_b(
            {"actor": PLATFORM, "reason_code": "TABLE_CLOSED", "reason": "", "state": "SHUFFLED"}
        ),
        VALID,
        {B: OK},
    ),
    Case(
        "the service's void at the deal deadline",
        _void_b(
            {
                "actor": "service",
                "reason_code": "DEAL_DEADLINE_PASSED",
                "reason": "",
                "state": "SHUFFLED",
            }
        ),
        VALID,
        {B: OK},
    ),
    Case(
        "a deadline void that names no actor",
        _void_b({"reason_code": "DEAL_DEADLINE_PASSED", "reason": "", "state": "SHUFFLED"}),
        VALID,
        {B: OK},
    ),
    Case(
        "a certificate as the actor",
        _actor("ROUND_VOIDED", "cert:platform.casino-a.example"),
        VALID,
        {A: OK},
    ),
    Case("an actor of 256 bytes", _actor("ROUND_DEALT", "cert:" + "é" * 125 + "x"), VALID, {A: OK}),
    Case("the console as an actor", _actor("ROUND_REVEALED", "console"), VALID, {A: OK}),
    Case(
        "a forget of the old form",
        _edit("PLAYER_FORGOTTEN", None, actor=None, operator=None),
        VALID,
    ),
    Case("a deal without its software", _edit("ROUND_DEALT", A, software=None), VALID, {A: OK}),
    Case("the round settled, naming its actor", _settled_instead, VALID, {A: OK}),
    # -- the better-of arithmetic after the deal ------------------------------------------------
    Case("a seat paid its result minus 1", _paid([99, 250, 0], -349), INVALID, {A: at_outcome()}),
    Case(
        "a seat paid more than its result", _paid([100, 251, 0], -351), INVALID, {A: at_outcome()}
    ),
    Case("the loser charged its loss", _paid([100, 250, -75], -275), INVALID, {A: at_outcome()}),
    Case(
        "the loser paid its stake back twice",
        _paid([100, 250, 75], -425),
        INVALID,
        {A: at_outcome()},
    ),
    Case("the dealer's delta off by one", _paid([100, 250, 0], -349), INVALID, {A: at_outcome()}),
    Case(
        "the paid seats in another order",
        _void_a(paid={"dealer_delta": -350, "players": FAIR_PAID["players"][::-1]}),
        INVALID,
        {A: at_outcome()},
    ),
    Case("a result the hands do not give", _result_of_another_deal, INVALID, {A: at_outcome()}),
    Case(
        "a void after the deal without its result",
        _void_a(result=None),
        INVALID,
        {A: at_outcome()},
    ),
    # -- forms of the void ----------------------------------------------------------------------
    Case(
        "a void of the old form after the reveal",
        _without_the_reveal(
            {
                "operator": OPERATOR,
                "reason": "x",
                "state": "REVEALED",
                "server_seed": DEALT_ROUND["server_seed"],
            }
        ),
        INVALID,
        {A: at_outcome()},
    ),
    Case(
        "a void of the old form after the deal",
        _without_the_reveal(
            {
                "operator": OPERATOR,
                "reason": "the shoe was dropped",
                "state": "DEALT",
                "server_seed": DEALT_ROUND["server_seed"],
            }
        ),
        INVALID,
        {A: at_outcome()},
    ),
    Case(
        "a void after the deal with no reveal before it",
        _without_the_reveal({**FAIR_VOID, "state": "DEALT"}),
        INVALID,
        {A: at_outcome()},
    ),
    Case(
        "a shuffled round's void that pays",
        _void_b(
            {
                "reason_code": "TABLE_CLOSED",
                "reason": "",
                "state": "SHUFFLED",
                "result": VOID_RESULT,
                "paid": FAIR_PAID,
            }
        ),
        INVALID,
        {B: at_outcome()},
    ),
    Case(
        "a revealed round's void that calls it SHUFFLED",
        _void_a(state="SHUFFLED"),
        INVALID,
        {A: at_outcome()},
    ),
    Case(
        "a void after the reveal that calls it SHUFFLED and pays nothing",
        _void_a(state="SHUFFLED", result=None, paid=None),
        INVALID,
        {A: at_outcome()},
    ),
    Case(
        "a reason code not in the list",
        _void_a(reason_code="OPERATOR_WISH"),
        INVALID,
        {A: at_outcome()},
    ),
    Case(
        "the deadline code from a token",
        _void_b(
            {
                "actor": PLATFORM,
                "reason_code": "DEAL_DEADLINE_PASSED",
                "reason": "",
                "state": "SHUFFLED",
            }
        ),
        INVALID,
        {B: at_outcome()},
    ),
    Case(
        "the deadline code after the deal",
        _void_a(actor="service", reason_code="DEAL_DEADLINE_PASSED"),
        INVALID,
        {A: at_outcome()},
    ),
    Case(
        "a reason with a line break", _void_a(reason="wallet\ntimeout"), INVALID, {A: at_outcome()}
    ),
    # -- actors ---------------------------------------------------------------------------------
    Case(
        "a token actor without a name", _actor("ROUND_DEALT", "token:"), INVALID, {A: at_entries()}
    ),
    Case(
        "a token actor with a space",
        _actor("ROUND_DEALT", "token:casino a"),
        INVALID,
        {A: at_entries()},
    ),
    Case(
        "a token actor starting with -",
        _actor("ROUND_VOIDED", "token:-casino"),
        INVALID,
        {A: at_entries()},
    ),
    Case(
        "a certificate actor without a name",
        _actor("ROUND_REVEALED", "cert:"),
        INVALID,
        {A: at_entries()},
    ),
    Case(
        "an actor of no known form", _actor("ROUND_COMMITTED", "root"), INVALID, {A: at_entries()}
    ),
    Case(
        "an actor with a NUL",
        _actor("ROUND_VOIDED", "cert:casino\u0000"),
        INVALID,
        {A: at_entries()},
    ),
    Case("an actor that is a number", _actor("ROUND_DEALT", 7), INVALID, {A: at_entries()}),
    Case(
        "an actor of 257 bytes",
        _actor("ROUND_DEALT", "cert:" + "é" * 126),
        INVALID,
        {A: at_entries()},
    ),
    Case("a bad actor on a stop", _actor("SERVICE_STOPPED", "operator", None), INVALID, {A: OK}),
    Case("a bad actor on a forget", _actor("PLAYER_FORGOTTEN", "Bob", None), INVALID),
    Case(
        "a forget naming a player",
        _edit("PLAYER_FORGOTTEN", None, player_id="bob"),
        INVALID,
    ),
    # -- operators (issue 38) -------------------------------------------------------------------
    Case("no operator in any entry", _no_operators, VALID, {A: OK, B: OK}),
    Case("an operator of 64 characters", _operator("0" + "a." * 31 + "z"), VALID, {A: OK}),
    Case("another operator", _operator("casino-b.eu_1"), VALID, {A: OK}),
    Case("a forget naming its operator alone", _edit("PLAYER_FORGOTTEN", None, actor=None), VALID),
    Case(
        "two operators' rounds open at one table id",
        _one_table_for_two("casino-b"),
        VALID,
        {A: OK, B: OK},
    ),
    Case(
        "one operator's two rounds open at one table",
        _one_table_for_two(OPERATOR),
        INVALID,
        {A: OK, B: OK},
    ),
    Case(
        "the operator changed at the reveal",
        _operator("casino-b", A, "ROUND_REVEALED"),
        INVALID,
        {A: at_entries()},
    ),
    Case(
        "the operator changed at the void",
        _operator("casino-b", A, "ROUND_VOIDED"),
        INVALID,
        {A: at_entries()},
    ),
    Case(
        "the deal naming no operator",
        _operator(None, A, "ROUND_DEALT"),
        INVALID,
        {A: at_entries()},
    ),
    Case(
        "an old round's void naming an operator",
        _operator(OPERATOR, B, "ROUND_VOIDED"),
        INVALID,
        {B: at_entries()},
    ),
    Case(
        "the commitment alone naming no operator",
        _operator(None, A, "ROUND_COMMITTED"),
        INVALID,
        {A: at_entries()},
    ),
    Case("an operator in capitals", _operator("Casino-A"), INVALID, {A: at_entries()}),
    Case("every operator as an operator", _operator("*"), INVALID, {A: at_entries()}),
    Case("an empty operator", _operator(""), INVALID, {A: at_entries()}),
    Case("an operator of 65 characters", _operator("a" * 65), INVALID, {A: at_entries()}),
    Case("an operator starting with -", _operator("-casino"), INVALID, {A: at_entries()}),
    Case("an operator with a line break", _operator("casino-a\n"), INVALID, {A: at_entries()}),
    Case("an operator that is a number", _operator(7), INVALID, {A: at_entries()}),
    Case("an operator that is a list", _operator(["casino-a"]), INVALID, {A: at_entries()}),
    Case(
        "a bad operator on a forget", _edit("PLAYER_FORGOTTEN", None, operator="casino a"), INVALID
    ),
    # -- the rest -------------------------------------------------------------------------------
    Case(
        "a deal's software with an upper-case digest",
        _edit("ROUND_DEALT", A, software={**SOFTWARE, "sha256": "5E" * 32}),
        INVALID,
        {A: at_entries()},
    ),
    Case("a stop holding more", _edit("SERVICE_STOPPED", None, grace=1), INVALID, {A: OK}),
    Case(
        "a token change holding a hash",
        _edit("TOKENS_CHANGED", None, added=[{"name": "x", "role": "operator", "sha256": "ab"}]),
        INVALID,
    ),
    Case(
        "a token change naming a person",
        _edit("TOKENS_CHANGED", None, revoked=[{"name": "Jane Doe", "role": "operator"}]),
        INVALID,
    ),
    Case(
        "a token change naming an operator that is none",
        _edit("TOKENS_CHANGED", None, added=[{"name": "x", "role": "auditor", "operator": "A"}]),
        INVALID,
    ),
    Case("an entry of an unknown kind", _rename("SERVICE_STOPPED", "SERVICE_PAUSED"), INVALID),
]


def round_document(round_id: str) -> dict[str, Any] | None:
    """The revealed round a receipt of the round carries: none for a round never dealt."""
    return copy.deepcopy(DEALT_ROUND) if round_id == A else None
