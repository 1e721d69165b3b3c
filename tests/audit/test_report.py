"""The report from the log (issue 38, parts 4 and 1): its figures against a hand computation,
voids before and after the deal, period boundaries, operators (old entries without the member
included), filters, the output forms, additivity, and the entries its reader refuses. The
hand-built logs and their hand-computed figures are in tests/audit/report_logs.py."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.audit.bundle import BundleFormatError
from gnau_service.audit.entries import EntryKind, JsonValue, LogEntry, decode_entry
from gnau_service.audit.report import (
    CSV_COLUMNS,
    REPORT_FORMAT,
    LogReport,
    Period,
    ReportError,
    RowFigures,
    csv_text,
    json_document,
)
from gnau_service.audit.report_reading import (
    UNPINNED_WARNING,
    ReportInputError,
    bundle_entries,
    log_entries,
)
from gnau_service.rules.house_rules import HouseRules
from tests.audit.logs import MemoryLog, honest_log, new_signer
from tests.audit.report_logs import (
    HandFigures,
    committed,
    dealt,
    hand_log,
    of,
    operators_log,
    settled,
    voided_after,
    voided_before,
)

DEFAULT_RULES = ("false", "false", "true", "true", "dealer", "points", "false", "1")


def report_of(log: MemoryLog, period: Period, **options: object) -> LogReport:
    report = LogReport(period, **options)  # type: ignore[arg-type]
    key = log.signer.verifier
    checked = bundle_entries((line.encode() for line in log.bundle_lines()), [key])
    return report.add_all(checked.entries())


def rows_by(report: LogReport) -> dict[tuple[str, str], RowFigures]:
    rows = report.rows(HandFigures())
    assert {row.key.operator for row in rows} <= {"default"}
    return {(row.key.period, row.key.table_id): row for row in rows}


def operator_rows(report: LogReport) -> dict[tuple[str, str, str], RowFigures]:
    return {
        (row.key.period, row.key.operator, row.key.table_id): row
        for row in report.rows(HandFigures())
    }


def test_monthly_figures_are_the_hand_computation() -> None:
    rows = rows_by(report_of(hand_log(), Period.MONTH))
    assert sorted(rows) == [("2026-11", "t-1"), ("2026-11", "t-2"), ("2026-12", "t-1")]

    november = rows["2026-11", "t-1"]
    assert november.key.rules_text == DEFAULT_RULES
    sums = november.sums
    assert (sums.rounds_settled, sums.rounds_voided_before_deal, sums.rounds_voided_after_deal) == (
        1,
        1,
        0,
    )
    assert (sums.seats, sums.stakes, sums.returned, sums.hands_returned) == (2, 30, 30, 30)
    assert (sums.stake_squares, sums.stake_pairs) == (500, 400)
    assert november.actual_rtp == november.hands_rtp == 1
    assert november.exact_rtp == Fraction(19, 20)
    assert november.variance_of_hands_rtp == Fraction(14, 9)
    assert november.standard_error is not None and november.z_score is not None
    assert round(november.standard_error, 6) == Decimal("1.247219")
    assert round(november.z_score, 3) == Decimal("0.040")

    voided = rows["2026-11", "t-2"]
    sums = voided.sums
    assert (sums.rounds_settled, sums.rounds_voided_after_deal, sums.seats_voided_after_deal) == (
        0,
        1,
        2,
    )
    assert (sums.stakes, sums.returned, sums.hands_returned) == (20, 30, 20)
    assert voided.actual_rtp == Fraction(3, 2)
    assert voided.hands_rtp == 1
    assert voided.variance_of_hands_rtp == Fraction(3, 2)
    assert voided.standard_error is not None and voided.z_score is not None
    assert round(voided.standard_error, 6) == Decimal("1.224745")
    assert round(voided.z_score, 3) == Decimal("0.041")

    december = rows["2026-12", "t-1"]
    assert (december.sums.stakes, december.sums.returned, december.sums.stake_pairs) == (5, -45, 0)
    assert december.actual_rtp == -9
    assert december.variance_of_hands_rtp == 2
    assert december.z_score is not None and round(december.z_score, 3) == Decimal("-7.036")


def test_covariance_is_asked_only_for_rows_with_several_seats_in_a_round() -> None:
    figures = HandFigures()
    report_of(hand_log(), Period.MONTH).rows(figures)
    assert figures.covariance_asked == 2  # November's two rows; December's round has one seat


def test_a_round_counts_in_the_period_of_its_final_entry() -> None:
    # Round B was committed on November 30th and settled on December 1st.
    days = rows_by(report_of(hand_log(), Period.DAY))
    assert sorted(days) == [("2026-11-30", "t-1"), ("2026-11-30", "t-2"), ("2026-12-01", "t-1")]
    assert days["2026-12-01", "t-1"].sums.rounds_settled == 1
    years = rows_by(report_of(hand_log(), Period.YEAR))
    assert sorted(years) == [("2026", "t-1"), ("2026", "t-2")]
    year = years["2026", "t-1"]
    assert (year.sums.rounds_settled, year.sums.rounds_voided_before_deal) == (2, 1)
    assert (year.sums.stakes, year.sums.returned, year.sums.stake_pairs) == (35, -15, 400)
    assert year.actual_rtp == Fraction(-3, 7)
    assert year.variance_of_hands_rtp == Fraction(58, 49)
    assert year.standard_error is not None and year.z_score is not None
    assert round(year.standard_error, 6) == Decimal("1.087968")
    assert round(year.z_score, 3) == Decimal("-1.267")


@pytest.mark.parametrize(
    ("final", "period"),
    [
        ("2026-12-31T23:59:59.999999Z", "2026"),
        ("2027-01-01T00:00:00Z", "2027"),
    ],
)
def test_the_year_boundary_is_utc_midnight(final: str, period: str) -> None:
    log = MemoryLog(new_signer())
    log.time = "2026-12-31T23:00:00Z"
    log.append(EntryKind.ROUND_COMMITTED, committed("t"), "r")
    log.append(EntryKind.ROUND_DEALT, dealt(), "r")
    log.time = final
    log.append(EntryKind.ROUND_SETTLED, settled((1, 1, 1)), "r")
    log.checkpoint()
    assert list(rows_by(report_of(log, Period.YEAR))) == [(period, "t")]


def test_since_until_and_tables_filter_by_the_final_entry() -> None:
    december = report_of(hand_log(), Period.MONTH, since=date(2026, 12, 1))
    assert list(rows_by(december)) == [("2026-12", "t-1")]
    november = report_of(hand_log(), Period.MONTH, until=date(2026, 11, 30))
    assert sorted(rows_by(november)) == [("2026-11", "t-1"), ("2026-11", "t-2")]
    table = report_of(hand_log(), Period.MONTH, tables=frozenset({"t-2"}))
    assert list(rows_by(table)) == [("2026-11", "t-2")]


def test_rows_split_by_rule_set() -> None:
    log = MemoryLog(new_signer())
    for number, rules in enumerate([HouseRules(), HouseRules(decks=2), HouseRules()]):
        log.append(EntryKind.ROUND_COMMITTED, committed("t", rules), f"r{number}")
        log.append(EntryKind.ROUND_DEALT, dealt(), f"r{number}")
        log.append(EntryKind.ROUND_SETTLED, settled((1, 10, -10)), f"r{number}")
    log.checkpoint()
    rows = report_of(log, Period.MONTH).rows(HandFigures())
    assert [(row.key.rules_text[-1], row.sums.rounds_settled) for row in rows] == [
        ("1", 2),
        ("2", 1),
    ]


def test_open_rounds_are_in_no_row() -> None:
    log = hand_log()
    log.append(EntryKind.ROUND_COMMITTED, committed("t-3"), "open")
    log.checkpoint()
    report = report_of(log, Period.MONTH)
    assert report.rounds_open == 1
    assert ("2026-11", "t-3") not in rows_by(report)


def test_the_sheets_figures_for_single_seat_rounds() -> None:
    # The default rule set's exact figures, written out from its shipped table and PAR sheet
    # (docs/par/default.md): RTP 57273199987/60403728840, variance about 2.289993.
    log = MemoryLog(new_signer())
    log.append(EntryKind.ROUND_COMMITTED, committed("t"), "r")
    log.append(EntryKind.ROUND_DEALT, dealt(), "r")
    log.append(EntryKind.ROUND_SETTLED, settled((1, 1, 0)), "r")
    log.checkpoint()
    (row,) = report_of(log, Period.MONTH).rows()
    assert row.exact_rtp == Fraction(57273199987, 60403728840)
    assert row.standard_error is not None
    assert abs(row.standard_error - Decimal("2.289993442").sqrt()) < Decimal("1e-9")


# -- operators -------------------------------------------------------------------------------------


def test_each_operator_has_its_own_rows_and_old_entries_are_the_defaults() -> None:
    rows = operator_rows(report_of(operators_log(), Period.MONTH))
    # Sorted by period, then operator: casino-a before default.
    assert list(rows) == [
        ("2026-12", "casino-a", "t-1"),
        ("2026-12", "casino-a", "t-2"),
        ("2026-12", "default", "t-1"),
    ]

    casino = rows["2026-12", "casino-a", "t-1"]
    assert (casino.sums.rounds_settled, casino.sums.seats, casino.sums.stakes) == (1, 2, 40)
    assert (casino.sums.returned, casino.sums.stake_squares, casino.sums.stake_pairs) == (
        40,
        1000,
        600,
    )
    assert casino.actual_rtp == 1
    assert casino.variance_of_hands_rtp == Fraction(13, 8)
    assert casino.standard_error is not None and casino.z_score is not None
    assert round(casino.standard_error, 6) == Decimal("1.274755")
    assert round(casino.z_score, 3) == Decimal("0.039")

    voided = rows["2026-12", "casino-a", "t-2"]
    assert (voided.sums.rounds_voided_before_deal, voided.sums.stakes) == (1, 0)
    assert voided.actual_rtp is None and voided.z_score is None

    # Round E (no operator member) and round F ("default") share a row.
    default = rows["2026-12", "default", "t-1"]
    assert (default.sums.rounds_settled, default.sums.seats, default.sums.stakes) == (2, 2, 30)
    assert (default.sums.returned, default.sums.stake_squares, default.sums.stake_pairs) == (
        20,
        500,
        0,
    )
    assert default.actual_rtp == Fraction(2, 3)
    assert default.variance_of_hands_rtp == Fraction(10, 9)
    assert default.standard_error is not None and default.z_score is not None
    assert round(default.standard_error, 6) == Decimal("1.054093")
    assert round(default.z_score, 3) == Decimal("-0.269")


@pytest.mark.parametrize(
    ("operators", "tables", "expected"),
    [
        ({"default"}, None, [("2026-12", "default", "t-1")]),
        ({"casino-a"}, None, [("2026-12", "casino-a", "t-1"), ("2026-12", "casino-a", "t-2")]),
        ({"casino-a"}, {"t-1"}, [("2026-12", "casino-a", "t-1")]),
        (None, {"t-1"}, [("2026-12", "casino-a", "t-1"), ("2026-12", "default", "t-1")]),
        ({"casino-b"}, None, []),
    ],
)
def test_the_operator_filter(
    operators: set[str] | None, tables: set[str] | None, expected: list[tuple[str, str, str]]
) -> None:
    report = report_of(
        operators_log(),
        Period.MONTH,
        operators=None if operators is None else frozenset(operators),
        tables=None if tables is None else frozenset(tables),
    )
    assert list(operator_rows(report)) == expected


def test_the_default_operators_rows_are_the_old_logs_alone() -> None:
    # hand_log's entries carry no operator member: all its rows are default's, and asking for
    # default's rounds leaves them as they are.
    every = report_of(hand_log(), Period.MONTH).sums
    default = report_of(hand_log(), Period.MONTH, operators=frozenset({"default"})).sums
    assert default == every
    assert {key.operator for key in every} == {"default"}


# -- output forms ----------------------------------------------------------------------------------


def test_csv_shape() -> None:
    report = report_of(hand_log(), Period.MONTH)
    text = csv_text(report.rows(HandFigures()))
    lines = list(csv.reader(io.StringIO(text)))
    assert lines[0] == [
        "period",
        "operator",
        "table_id",
        "currency",
        "ten_is_duke",
        "three_six_pair",
        "trips_make_ox",
        "five_small",
        "tie",
        "payout",
        "suited_double",
        "decks",
        "rounds_settled",
        "rounds_voided_before_deal",
        "rounds_voided_after_deal",
        "seats",
        "stakes",
        "returned",
        "actual_rtp",
        "hands_returned",
        "hands_rtp",
        "exact_rtp",
        "standard_error",
        "z_score",
    ]
    assert tuple(lines[0]) == CSV_COLUMNS
    assert lines[1:] == [
        [
            "2026-11",
            "default",
            "t-1",
            "XXX",  # a round from before the catalogue names no currency
            *DEFAULT_RULES,
            "1",
            "1",
            "0",
            "2",
            "30",
            "30",
            "1.000000",
            "30",
            "1.000000",
            "0.950000",
            "1.247219",
            "0.040",
        ],
        [
            "2026-11",
            "default",
            "t-2",
            "XXX",  # a round from before the catalogue names no currency
            *DEFAULT_RULES,
            "0",
            "0",
            "1",
            "2",
            "20",
            "30",
            "1.500000",
            "20",
            "1.000000",
            "0.950000",
            "1.224745",
            "0.041",
        ],
        [
            "2026-12",
            "default",
            "t-1",
            "XXX",  # a round from before the catalogue names no currency
            *DEFAULT_RULES,
            "1",
            "0",
            "0",
            "1",
            "5",
            "-45",
            "-9.000000",
            "-45",
            "-9.000000",
            "0.950000",
            "1.414214",
            "-7.036",
        ],
    ]
    assert text.endswith("\n") and "\r" not in text


def test_no_row_mixes_currencies() -> None:
    """One table's rounds in two currencies (its configuration changed between them) are two
    rows, each summing amounts of its own currency only."""
    log = MemoryLog(new_signer())
    log.time = "2026-12-01T10:00:00Z"
    plays = [("r1", "EUR", 2, 10, 5), ("r2", "JPY", 0, 1000, -1000), ("r3", "EUR", 2, 20, -20)]
    for round_id, code, exponent, stake, delta in plays:
        currency = {"code": code, "exponent": exponent}
        log.append(EntryKind.ROUND_COMMITTED, {**committed("t"), "currency": currency}, round_id)
        log.append(EntryKind.ROUND_SETTLED, settled((1, stake, delta)), round_id)
    log.checkpoint()
    rows = report_of(log, Period.MONTH).rows(HandFigures())
    assert [(r.key.currency, r.sums.stakes, r.sums.returned) for r in rows] == [
        ("EUR", 30, 15),  # 10 + 5 back, 20 - 20 back
        ("JPY", 1000, 0),
    ]
    lines = list(csv.reader(io.StringIO(csv_text(rows))))
    assert [line[3] for line in lines] == ["currency", "EUR", "JPY"]


def test_csv_row_without_stakes_has_empty_rates() -> None:
    log = MemoryLog(new_signer())
    log.append(EntryKind.ROUND_COMMITTED, committed("t"), "r")
    log.append(EntryKind.ROUND_VOIDED, voided_before(), "r")
    log.checkpoint()
    lines = list(
        csv.reader(io.StringIO(csv_text(report_of(log, Period.MONTH).rows(HandFigures()))))
    )
    assert lines[1][12:] == ["0", "1", "0", "0", "0", "0", "", "0", "", "0.950000", "", ""]


def test_json_shape() -> None:
    report = report_of(hand_log(), Period.MONTH, tables=frozenset({"t-2", "t-1"}))
    document = json.loads(json.dumps(json_document(report, report.rows(HandFigures()))))
    assert document["format"] == REPORT_FORMAT
    assert {key: value for key, value in document.items() if key != "rows"} == {
        "format": "gnau-dealer/report/v1",
        "period": "month",
        "since": None,
        "until": None,
        "operators": None,
        "tables": ["t-1", "t-2"],
        "entries": 13,
        "rounds_open": 0,
        "rounds_outside": 0,
    }
    row = document["rows"][1]
    assert row == {
        "period": "2026-11",
        "operator": "default",
        "table_id": "t-2",
        "currency": "XXX",
        "house_rules": {
            "ten_is_duke": False,
            "three_six_pair": False,
            "trips_make_ox": True,
            "five_small": True,
            "tie": "dealer",
            "payout": "points",
            "suited_double": False,
            "decks": 1,
        },
        "rounds_settled": 0,
        "rounds_voided_before_deal": 0,
        "rounds_voided_after_deal": 1,
        "seats": 2,
        "stakes": 20,
        "returned": 30,
        "actual_rtp": "1.500000",
        "hands_returned": 20,
        "hands_rtp": "1.000000",
        "exact_rtp": "0.950000",
        "standard_error": "1.224745",
        "z_score": "0.041",
        "exact": {
            "actual_rtp": "3/2",
            "hands_rtp": "1/1",
            "exact_rtp": "19/20",
            "variance_of_hands_rtp": "3/2",
        },
    }


def test_csv_and_json_name_each_rows_operator() -> None:
    report = report_of(operators_log(), Period.MONTH, operators=frozenset({"default", "casino-a"}))
    rows = report.rows(HandFigures())
    lines = list(csv.reader(io.StringIO(csv_text(rows))))
    assert [line[:4] for line in lines] == [
        ["period", "operator", "table_id", "currency"],
        ["2026-12", "casino-a", "t-1", "XXX"],
        ["2026-12", "casino-a", "t-2", "XXX"],
        ["2026-12", "default", "t-1", "XXX"],
    ]
    assert lines[1][12:] == [
        "1",
        "0",
        "0",
        "2",
        "40",
        "40",
        "1.000000",
        "40",
        "1.000000",
        "0.950000",
        "1.274755",
        "0.039",
    ]
    assert lines[3][12:] == [
        "2",
        "0",
        "0",
        "2",
        "30",
        "20",
        "0.666667",
        "20",
        "0.666667",
        "0.950000",
        "1.054093",
        "-0.269",
    ]
    document = json.loads(json.dumps(json_document(report, rows)))
    assert document["operators"] == ["casino-a", "default"]
    assert [(row["operator"], row["table_id"], row["stakes"]) for row in document["rows"]] == [
        ("casino-a", "t-1", 40),
        ("casino-a", "t-2", 0),
        ("default", "t-1", 30),
    ]
    assert document["rows"][2]["exact"]["variance_of_hands_rtp"] == "10/9"


# -- additivity ------------------------------------------------------------------------------------

_SEAT = st.tuples(st.integers(1, 1000), st.integers(-10_000, 10_000))


@st.composite
def rounds(draw: st.DrawFn) -> list[tuple[str, str, str, list[tuple[int, int]]]]:
    """Rounds as (table, ending, final time, seats (stake, delta)); ending is settled, before
    (voided before the deal) or after (voided after the deal, paying max(delta, 0))."""
    return draw(
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b"]),
                st.sampled_from(["settled", "before", "after"]),
                st.sampled_from(
                    ["2026-01-31T23:59:59Z", "2026-02-01T00:00:00Z", "2027-06-15T12:00:00Z"]
                ),
                st.lists(_SEAT, min_size=1, max_size=4),
            ),
            max_size=12,
        )
    )


def _entries(plan: list[tuple[str, str, str, list[tuple[int, int]]]]) -> list[LogEntry]:
    """Entries built directly (the core does not check signatures): each round's in order."""
    entries: list[LogEntry] = []

    def add(kind: EntryKind, payload: dict[str, JsonValue], round_id: str, time: str) -> None:
        entries.append(
            LogEntry(len(entries), kind, time, round_id, payload, "0" * 64, "0" * 8, "0" * 128)
        )

    for number, (table, ending, time, seats) in enumerate(plan):
        round_id = f"r{number}"
        numbered = [(seat, stake, delta) for seat, (stake, delta) in enumerate(seats, start=1)]
        add(EntryKind.ROUND_COMMITTED, committed(table), round_id, "2026-01-01T00:00:00Z")
        if ending == "before":
            add(EntryKind.ROUND_VOIDED, voided_before(), round_id, time)
            continue
        add(EntryKind.ROUND_DEALT, dealt(), round_id, "2026-01-01T00:00:00Z")
        if ending == "settled":
            add(EntryKind.ROUND_SETTLED, settled(*numbered), round_id, time)
        else:
            paid = [(seat, stake, max(delta, 0)) for seat, stake, delta in numbered]
            add(EntryKind.ROUND_VOIDED, voided_after(numbered, paid), round_id, time)
    return entries


@settings(max_examples=60, deadline=None)
@given(plan=rounds(), split=st.integers(0, 12), period=st.sampled_from(list(Period)))
def test_totals_are_additive_over_a_split_of_the_rounds(
    plan: list[tuple[str, str, str, list[tuple[int, int]]]], split: int, period: Period
) -> None:
    whole = LogReport(period).add_all(_entries(plan)).sums
    first = LogReport(period).add_all(_entries(plan[:split])).sums
    second = LogReport(period).add_all(_entries(plan[split:])).sums
    for key in set(first) | set(second):
        if key in first and key in second:
            first[key].add(second[key])
        else:
            first.setdefault(key, second.get(key))  # type: ignore[arg-type]
    assert first == whole
    # And every amount is the plan's: stakes, and what each ending returns.
    stakes = sum(stake for _, ending, _, seats in plan if ending != "before" for stake, _ in seats)
    assert sum(sums.stakes for sums in whole.values()) == stakes
    paid = sum(
        stake + (delta if ending == "settled" else max(delta, 0))
        for _, ending, _, seats in plan
        if ending != "before"
        for stake, delta in seats
    )
    assert sum(sums.returned for sums in whole.values()) == paid


@settings(max_examples=30, deadline=None)
@given(outcomes=st.lists(st.integers(-10, 10), min_size=1, max_size=30))
def test_single_unit_seats_give_the_textbook_standard_error(outcomes: list[int]) -> None:
    plan = [("a", "settled", "2026-03-01T00:00:00Z", [(1, delta)]) for delta in outcomes]
    (row,) = LogReport(Period.YEAR).add_all(_entries(plan)).rows(HandFigures())
    # sqrt(variance / n), with the variance 2 of HandFigures.
    assert row.variance_of_hands_rtp == Fraction(2, len(outcomes))


# -- what the core refuses -------------------------------------------------------------------------


def _entry(index: int, kind: EntryKind, payload: dict[str, JsonValue]) -> LogEntry:
    return LogEntry(index, kind, "2026-01-01T00:00:00Z", "r", payload, "0" * 64, "0" * 8, "0" * 128)


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ([(EntryKind.ROUND_SETTLED, settled((1, 1, 1)))], "without an open round"),
        ([(EntryKind.ROUND_COMMITTED, committed("t"))] * 2, "committed twice"),
        ([(EntryKind.ROUND_COMMITTED, {**committed("t"), "table_id": 7})], "must be a string"),
        (
            [(EntryKind.ROUND_COMMITTED, {**committed("t"), "currency": {"code": "eur"}})],
            "currency must be",
        ),
        ([(EntryKind.ROUND_COMMITTED, {**committed("t"), "house_rules": {"decks": 9}})], "decks"),
        (
            [
                (EntryKind.ROUND_COMMITTED, committed("t")),
                (EntryKind.ROUND_SETTLED, {"players": [{"seat": 1, "stake": "1", "delta": 0}]}),
            ],
            "integer seat, stake and delta",
        ),
        (
            [
                (EntryKind.ROUND_COMMITTED, committed("t")),
                (EntryKind.ROUND_SETTLED, settled((1, 0, 0))),
            ],
            "not positive",
        ),
        (
            [
                (EntryKind.ROUND_COMMITTED, committed("t")),
                (EntryKind.ROUND_DEALT, dealt()),
                (EntryKind.ROUND_VOIDED, voided_before()),
            ],
            "must carry its result and paid",
        ),
        (
            [(EntryKind.ROUND_COMMITTED, of("Casino-A", committed("t")))],
            "operator 'Casino-A' is not 1 to 64 of a-z",
        ),
        (
            [(EntryKind.ROUND_COMMITTED, {**committed("t"), "operator": 7})],
            "operator 7 is not a string",
        ),
        (
            [
                (EntryKind.ROUND_COMMITTED, of("casino-a", committed("t"))),
                (EntryKind.ROUND_DEALT, of("casino-b", dealt())),
            ],
            "ROUND_DEALT names operator 'casino-b', but the round's commitment names operator"
            " 'casino-a'",
        ),
        (
            [
                (EntryKind.ROUND_COMMITTED, of("casino-a", committed("t"))),
                (EntryKind.ROUND_DEALT, of("casino-a", dealt())),
                (EntryKind.ROUND_SETTLED, settled((1, 1, 1))),
            ],
            "ROUND_SETTLED names no operator, but the round's commitment names operator 'casino-a'",
        ),
        (
            [
                (EntryKind.ROUND_COMMITTED, committed("t")),
                (EntryKind.ROUND_VOIDED, of("casino-a", voided_before())),
            ],
            "ROUND_VOIDED names operator 'casino-a', but the round's commitment names no operator",
        ),
        (
            # Even the default operator, named by some of a round's entries and not others.
            [
                (EntryKind.ROUND_COMMITTED, committed("t")),
                (EntryKind.ROUND_DEALT, of("default", dealt())),
            ],
            "ROUND_DEALT names operator 'default', but the round's commitment names no operator",
        ),
        (
            [(EntryKind.ROUND_COMMITTED, {**committed("t"), "operator": None})],
            "operator None is not a string",
        ),
    ],
)
def test_entries_the_report_cannot_count_are_refused(
    entries: list[tuple[EntryKind, dict[str, JsonValue]]], reason: str
) -> None:
    report = LogReport(Period.MONTH)
    with pytest.raises(ReportError, match=re.escape(reason)) as raised:
        for index, (kind, payload) in enumerate(entries):
            report.add(_entry(index, kind, payload))
    assert raised.value.index == len(entries) - 1
    assert report.sums == {}


# -- the reader ------------------------------------------------------------------------------------


def test_a_bundle_starting_mid_log_counts_earlier_rounds_outside() -> None:
    log = hand_log()
    # Entry 7 is round A's commitment: B, wholly after it, is counted; D and C are not seen.
    lines = log.bundle_lines(first_index=8)
    checked = bundle_entries((line.encode() for line in lines), [log.signer.verifier])
    report = LogReport(Period.MONTH, partial=True).add_all(checked.entries())
    assert report.rounds_outside == 1  # round A: its settlement without its commitment
    assert [(key.period, key.table_id) for key in report.sums] == [("2026-12", "t-1")]
    assert any("start at 8" in warning for warning in checked.warnings)


def test_without_a_pinned_key_the_reader_warns() -> None:
    log = hand_log()
    checked = bundle_entries(line.encode() for line in log.bundle_lines())
    assert checked.warnings == [UNPINNED_WARNING]
    assert len(list(checked.entries())) == 13


def test_a_forged_entry_is_refused() -> None:
    log = hand_log()
    lines = log.bundle_lines()
    forged = [line.replace('\\"stake\\":20', '\\"stake\\":2') for line in lines]
    assert forged != lines
    checked = bundle_entries((line.encode() for line in forged), [log.signer.verifier])
    with pytest.raises(ReportInputError, match="signature does not verify"):
        list(checked.entries())


def test_another_key_is_refused() -> None:
    log = hand_log()
    other = new_signer().verifier
    checked = bundle_entries((line.encode() for line in log.bundle_lines()), [other])
    with pytest.raises(ReportInputError, match="entry 0: signed by key"):
        list(checked.entries())


def test_a_removed_entry_is_refused() -> None:
    log = hand_log()
    lines = log.bundle_lines()
    entry_lines = [n for n, line in enumerate(lines) if line.startswith('{"entry"')]
    del lines[entry_lines[3]]
    checked = bundle_entries((line.encode() for line in lines), [log.signer.verifier])
    with pytest.raises(ReportInputError, match="entry 3: the entry says index 4"):
        list(checked.entries())


def test_a_truncated_bundle_is_refused() -> None:
    log = hand_log()
    lines = log.bundle_lines()[:-1]
    checked = bundle_entries((line.encode() for line in lines), [log.signer.verifier])
    with pytest.raises(ReportInputError, match="truncated or padded"):
        list(checked.entries())


def test_a_file_that_is_not_a_bundle_is_refused() -> None:
    with pytest.raises(BundleFormatError):
        bundle_entries([b'{"format": "something else"}\n'])


def test_a_store_log_reads_alike() -> None:
    log = honest_log(2)
    key = log.signer.verifier
    checked = log_entries(log.entries, len(log.entries), log.public_keys(), [key])
    entries = list(checked.entries())
    assert entries == [decode_entry(data, key) for data in log.entries]
