"""Small logs built by hand for the report's tests, and the figures a hand computation gives.

The rounds' payloads carry the members the report reads (a committed round's ``table_id`` and
``house_rules``, a settlement's or a void's seats, stakes and deltas) with amounts chosen by
hand; their hands are not real (the report does not replay rounds: ``gnau audit verify`` does).
Every entry is signed by the log key, so the report's reader checks it as any other.

:func:`hand_log`'s rounds, all under the default rule set and without an ``operator`` member
(entries from before operators: operator ``default``'s):

====== ======= ======================== ========================================================
round  table   final entry (UTC)        seats: (seat, stake, delta)
====== ======= ======================== ========================================================
A      t-1     2026-11-30T23:59:59Z     settled: (1, 10, +20), (2, 20, -20)
C      t-1     2026-11-30T12:00:00Z     voided before the deal
D      t-2     2026-11-30T13:00:00Z     voided after the deal: result (1, 10, -10), (2, 10, +10);
                                        paid (1, 10, 0), (2, 10, +10)
B      t-1     2026-12-01T00:00:01Z     settled: (1, 5, -50), committed 2026-11-30T23:59:59.5Z
====== ======= ======================== ========================================================

With the figures of :class:`HandFigures` (exact RTP 19/20, variance 2, covariance 1), by hand:

- November, t-1 (A, C): stakes 30; returned (10 + 20) + (20 - 20) = 30; actual RTP 1; stake
  squares 100 + 400 = 500; stake pairs 30² - 500 = 400; variance of the RTP
  (2·500 + 1·400) / 30² = 14/9; standard error √14 / 3 = 1.247219; z = 0.05 / 1.2472191 = 0.040.
- November, t-2 (D): stakes 20; returned 10 + 20 = 30 (actual 1.5); the hands returned 0 + 20
  = 20 (hands RTP 1); squares 200, pairs 400 - 200 = 200; variance (2·200 + 1·200) / 20² = 3/2;
  standard error 1.224745; z = 0.05 / 1.2247449 = 0.041.
- December, t-1 (B): stakes 5; returned 5 - 50 = -45 (actual -9); squares 25, no pairs;
  variance 2·25 / 5² = 2; standard error 1.414214; z = (-9 - 0.95) / 1.4142136 = -7.036.
- The year 2026, t-1 (A, B, C): stakes 35; returned -15 (RTP -3/7); squares 525, pairs 400;
  variance (2·525 + 400) / 35² = 58/49; standard error √58 / 7 = 1.087968;
  z = (-3/7 - 0.95) / 1.0879676 = -1.267.

:func:`operators_log`: two operators, both with a table ``t-1``, all under the default rule set,
every final entry in December 2026:

====== ========== ======= ===================== =================== ============================
round  operator   table   ``operator`` member   final entry (UTC)   seats: (seat, stake, delta)
====== ========== ======= ===================== =================== ============================
E      default    t-1     none (an old entry)   2026-12-02T10:00Z   settled: (1, 10, +10)
F      default    t-1     ``"default"``         2026-12-03T10:00Z   settled: (1, 20, -20)
G      casino-a   t-1     ``"casino-a"``        2026-12-03T11:00Z   settled: (1, 10, +30),
                                                                    (2, 30, -30)
H      casino-a   t-2     ``"casino-a"``        2026-12-04T10:00Z   voided before the deal
====== ========== ======= ===================== =================== ============================

By hand, with the same figures, by month:

- December, casino-a, t-1 (G): stakes 40; returned (10 + 30) + (30 - 30) = 40 (actual 1);
  squares 100 + 900 = 1000; pairs 40² - 1000 = 600; variance (2·1000 + 1·600) / 40² = 13/8;
  standard error √1.625 = 1.274755; z = 0.05 / 1.2747549 = 0.039.
- December, casino-a, t-2 (H): one round voided before the deal; no seats, no stakes, no rates.
- December, default, t-1 (E, F): stakes 30; returned 20 + 0 = 20 (actual 2/3); squares
  100 + 400 = 500, no pairs; variance 2·500 / 30² = 10/9; standard error √10 / 3 = 1.054093;
  z = (2/3 - 0.95) / 1.0540926 = -0.269.
"""

from __future__ import annotations

from fractions import Fraction

from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.rules.house_rules import HouseRules
from tests.audit.logs import MemoryLog, new_signer

SEED = "00" * 32


class HandFigures:
    """Figures chosen for hand computation, recording which rule sets asked for covariance."""

    def __init__(self) -> None:
        self.covariance_asked = 0

    def rtp(self, rules: HouseRules) -> Fraction:
        return Fraction(19, 20)

    def variance(self, rules: HouseRules) -> Fraction:
        return Fraction(2)

    def covariance(self, rules: HouseRules) -> Fraction:
        self.covariance_asked += 1
        return Fraction(1)


def committed(table_id: str, rules: HouseRules | None = None) -> dict[str, JsonValue]:
    return {
        "table_id": table_id,
        "house_rules": dict((rules or HouseRules()).as_dict()),
        "commitment": SEED,
    }


def of(operator: str, payload: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """``payload`` naming ``operator``, as the service logs every round entry since issue 38."""
    return {**payload, "operator": operator}


def players(*seats: tuple[int, int, int]) -> list[JsonValue]:
    return [
        {"seat": seat, "stake": stake, "outcome": "TIE", "delta": delta}
        for seat, stake, delta in seats
    ]


def settled(*seats: tuple[int, int, int]) -> dict[str, JsonValue]:
    return {
        "dealer": {"delta": -sum(delta for _, _, delta in seats)},
        "players": players(*seats),
    }


def voided_before() -> dict[str, JsonValue]:
    return {"reason_code": "TABLE_CLOSED", "reason": "", "state": "SHUFFLED", "server_seed": SEED}


def voided_after(
    result: list[tuple[int, int, int]], paid: list[tuple[int, int, int]]
) -> dict[str, JsonValue]:
    return {
        "reason_code": "GAME_MALFUNCTION",
        "reason": "",
        "state": "DEALT",
        "server_seed": SEED,
        "result": settled(*result),
        "paid": {
            "dealer_delta": -sum(delta for _, _, delta in paid),
            "players": [
                {"seat": seat, "stake": stake, "delta": delta} for seat, stake, delta in paid
            ],
        },
    }


def dealt() -> dict[str, JsonValue]:
    return {"seats": []}


def at(log: MemoryLog, time: str, kind: EntryKind, payload: dict[str, JsonValue], rid: str) -> None:
    log.time = time
    log.append(kind, payload, rid)


def hand_log() -> MemoryLog:
    """The log of the module's table, with a start entry and a checkpoint at its end."""
    log = MemoryLog(new_signer())
    log.time = "2026-11-30T00:00:00Z"
    log.append(EntryKind.SERVICE_STARTED, {"version": "test"})
    at(log, "2026-11-30T11:00:00Z", EntryKind.ROUND_COMMITTED, committed("t-1"), "C")
    at(log, "2026-11-30T12:00:00Z", EntryKind.ROUND_VOIDED, voided_before(), "C")
    at(log, "2026-11-30T12:30:00Z", EntryKind.ROUND_COMMITTED, committed("t-2"), "D")
    at(log, "2026-11-30T12:31:00Z", EntryKind.ROUND_DEALT, dealt(), "D")
    at(log, "2026-11-30T12:32:00Z", EntryKind.ROUND_REVEALED, {}, "D")
    at(
        log,
        "2026-11-30T13:00:00Z",
        EntryKind.ROUND_VOIDED,
        voided_after([(1, 10, -10), (2, 10, 10)], [(1, 10, 0), (2, 10, 10)]),
        "D",
    )
    at(log, "2026-11-30T23:00:00Z", EntryKind.ROUND_COMMITTED, committed("t-1"), "A")
    at(log, "2026-11-30T23:00:01Z", EntryKind.ROUND_DEALT, dealt(), "A")
    at(
        log,
        "2026-11-30T23:59:59Z",
        EntryKind.ROUND_SETTLED,
        settled((1, 10, 20), (2, 20, -20)),
        "A",
    )
    at(log, "2026-11-30T23:59:59.5Z", EntryKind.ROUND_COMMITTED, committed("t-1"), "B")
    at(log, "2026-11-30T23:59:59.9Z", EntryKind.ROUND_DEALT, dealt(), "B")
    at(log, "2026-12-01T00:00:01Z", EntryKind.ROUND_SETTLED, settled((1, 5, -50)), "B")
    log.checkpoint()
    return log


def operators_log() -> MemoryLog:
    """The log of :func:`operators_log`'s table (in the module's docstring), with a start entry
    and a checkpoint at its end."""
    log = MemoryLog(new_signer())
    log.time = "2026-12-01T00:00:00Z"
    log.append(EntryKind.SERVICE_STARTED, {"version": "test"})
    at(log, "2026-12-02T09:00:00Z", EntryKind.ROUND_COMMITTED, committed("t-1"), "E")
    at(log, "2026-12-02T09:00:01Z", EntryKind.ROUND_DEALT, dealt(), "E")
    at(log, "2026-12-02T10:00:00Z", EntryKind.ROUND_SETTLED, settled((1, 10, 10)), "E")
    a = "casino-a"
    at(log, "2026-12-03T09:00:00Z", EntryKind.ROUND_COMMITTED, of("default", committed("t-1")), "F")
    at(log, "2026-12-03T09:00:01Z", EntryKind.ROUND_COMMITTED, of(a, committed("t-1")), "G")
    at(log, "2026-12-03T09:00:02Z", EntryKind.ROUND_DEALT, of("default", dealt()), "F")
    at(log, "2026-12-03T09:00:03Z", EntryKind.ROUND_DEALT, of(a, dealt()), "G")
    at(
        log,
        "2026-12-03T10:00:00Z",
        EntryKind.ROUND_SETTLED,
        of("default", settled((1, 20, -20))),
        "F",
    )
    at(
        log,
        "2026-12-03T11:00:00Z",
        EntryKind.ROUND_SETTLED,
        of(a, settled((1, 10, 30), (2, 30, -30))),
        "G",
    )
    at(log, "2026-12-04T09:00:00Z", EntryKind.ROUND_COMMITTED, of(a, committed("t-2")), "H")
    at(log, "2026-12-04T10:00:00Z", EntryKind.ROUND_VOIDED, of(a, voided_before()), "H")
    log.checkpoint()
    return log
