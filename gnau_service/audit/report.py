"""Reports from the log: rounds, seats, stakes, payouts and the actual return to player, per
operator, table, rule set and period, computed from decoded log entries alone (docs/reports.md
says how each figure is computed, so that an auditor can recompute it by hand).

:class:`LogReport` takes entries in log order (:meth:`LogReport.add`) and keeps, per
:class:`RowKey`, integer sums only (:class:`RowSums`); :meth:`LogReport.rows` turns them into
:class:`RowFigures` with exact fractions, and a standard error from the rule set's PAR sheet
(:class:`ExactFigures`). Decimals appear only in the output forms, :func:`csv_text` and
:func:`json_document`.

A round is counted once, in the row of its operator, its table, its committed rule set and the
period (UTC day, month or year) of its *final* entry, its ``ROUND_SETTLED`` or ``ROUND_VOIDED``.
The operator is the ``operator`` member of the round's entries (issue 38, part 1), or
:data:`~gnau_service.audit.operators.DEFAULT_OPERATOR` for entries written before operators
existed, so that no row mixes operators. The key is a tuple: when round entries carry their
table's currency (issue 38, part 3) it joins the key, and a row's amounts stay in the one
currency of its key.

This module reads what it counts and checks only what counting needs (each round's events in a
possible order, the members it reads, the same ``operator`` member, or none, in all of a round's
entries); the entries' signatures and chain are its reader's to check
(:mod:`gnau_service.audit.report_reading`), and the fairness and settlement of each round are
``gnau audit verify``'s.

>>> from gnau_service.audit.entries import LogEntry
>>> def entry(index, kind, payload, time="2026-12-01T10:00:00Z"):
...     return LogEntry(index, kind, time, "r-1", payload, "0" * 64, "0" * 8, "0" * 128)
>>> report = LogReport(Period.MONTH)
>>> report.add(entry(0, EntryKind.ROUND_COMMITTED,
...     {"table_id": "t-1", "house_rules": HouseRules().as_dict()}))
>>> report.add(entry(1, EntryKind.ROUND_SETTLED, {"players": [
...     {"seat": 1, "stake": 10, "delta": 20}, {"seat": 2, "stake": 5, "delta": -5}]}))
>>> [(key.operator, key.table_id, key.period, sums.stakes, sums.returned)
...  for key, sums in report.sums.items()]
[('default', 't-1', '2026-12', 15, 30)]
"""

from __future__ import annotations

import csv
import functools
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_HALF_EVEN, Context, Decimal
from enum import StrEnum
from fractions import Fraction
from typing import Final, Protocol

from gnau_service.audit.entries import EntryKind, JsonValue, LogEntry
from gnau_service.audit.operators import DEFAULT_OPERATOR, OPERATOR_FIELD, check_operator
from gnau_service.audit.round_events import CURRENCY_FIELD
from gnau_service.audit.timestamps import parse_utc_timestamp
from gnau_service.common.quoting import quoted
from gnau_service.rules.currency import Currency
from gnau_service.rules.errors import RulesError
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import DECIMAL_PLACES, fraction_text

REPORT_FORMAT: Final = "gnau-dealer/report/v1"
#: Places after the point of a z-score in the output forms (rates use :data:`DECIMAL_PLACES`).
Z_PLACES: Final = 3
#: Significant digits of the square root behind the standard error: far more than any output.
_SQRT_DIGITS: Final = 40


#: A row's currency for the rounds from before the table catalogue, which name none: ISO
#: 4217's code for "no currency".
NO_CURRENCY_CODE: Final = "XXX"


class ReportError(ValueError):
    """An entry the report cannot count: ``index`` names it."""

    def __init__(self, reason: str, index: int) -> None:
        super().__init__(f"entry {index:,}: {reason}")
        self.reason = reason
        self.index = index


class Period(StrEnum):
    """How rounds are grouped in time: by the UTC day, month or year of their final entry."""

    DAY = "day"
    MONTH = "month"
    YEAR = "year"

    def of(self, time: str) -> str:
        """The period a log time falls in: ``2026-12-01``, ``2026-12`` or ``2026``.

        >>> Period.DAY.of("2026-12-31T23:59:59.999999Z"), Period.MONTH.of("2027-01-01T00:00:00Z")
        ('2026-12-31', '2027-01')
        """
        moment = parse_utc_timestamp(time)
        return moment.strftime(_PERIOD_FORMATS[self])


_PERIOD_FORMATS: Final = {Period.DAY: "%Y-%m-%d", Period.MONTH: "%Y-%m", Period.YEAR: "%Y"}


@dataclass(frozen=True, order=True)
class RowKey:
    """What a row of the report groups by: amounts of different currencies are never summed
    together, so the currency is part of the key."""

    period: str
    operator: str
    table_id: str
    #: The ISO 4217 code of the round's currency (its commitment's ``currency``), or
    #: :data:`NO_CURRENCY_CODE` for a round from before the table catalogue.
    currency: str
    #: The rule set's ``as_text()`` values, in declaration order (so that keys sort).
    rules_text: tuple[str, ...]
    rules: HouseRules = field(compare=False)


@dataclass
class RowSums:
    """A row's integer sums. Every seat counted here was dealt and reached a result: the seats
    of settled rounds and of rounds voided after the deal (a void before the deal has none).
    Amounts are integer minor units."""

    rounds_settled: int = 0
    rounds_voided_before_deal: int = 0
    rounds_voided_after_deal: int = 0
    seats_settled: int = 0
    seats_voided_after_deal: int = 0
    #: The sum of the seats' stakes.
    stakes: int = 0
    #: What the players were paid back: stake + delta of each seat, the delta being the
    #: settlement's, or for a void after the deal its ``paid`` delta (the better of the hands'
    #: result and a refund).
    returned: int = 0
    #: What the hands earned: stake + delta of the hands' result, for every seat (a void after
    #: the deal's ``result``): the draw of the PAR sheet's distribution.
    hands_returned: int = 0
    #: The sum of each seat's stake squared, and the sum over rounds of the products of the
    #: stakes of each ordered pair of different seats: what the standard error needs.
    stake_squares: int = 0
    stake_pairs: int = 0

    def add(self, other: RowSums) -> None:
        for name in _SUM_NAMES:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def seats(self) -> int:
        return self.seats_settled + self.seats_voided_after_deal


_SUM_NAMES: Final = tuple(RowSums.__dataclass_fields__)


class ExactFigures(Protocol):
    """What the report needs of a rule set's PAR sheet, per unit stake of one seat: the exact
    return to player, the variance of a seat's result ``X``, and the covariance of two seats'
    results in one round (asked only for rows with a round of several seats)."""

    def rtp(self, rules: HouseRules) -> Fraction: ...
    def variance(self, rules: HouseRules) -> Fraction: ...
    def covariance(self, rules: HouseRules) -> Fraction: ...


class ParSheetFigures:
    """The PAR sheet's figures (docs/par.md). The return to player is the shipped table's
    (:meth:`~gnau_service.rules.return_to_player.ReturnToPlayer.of_rules`); the variance and
    the seat covariance are not shipped, so each is computed from the rule set's exact outcome
    distribution the first time a report needs it, and kept for the rest of the process (about
    a second for the variance and a few seconds for the covariance of a one-deck rule set, tens
    of seconds with eight decks)."""

    def rtp(self, rules: HouseRules) -> Fraction:
        from gnau_service.rules.return_to_player import ReturnToPlayer  # noqa: PLC0415

        return ReturnToPlayer.of_rules(rules).rtp

    def variance(self, rules: HouseRules) -> Fraction:
        return _sheet_variance(rules)

    def covariance(self, rules: HouseRules) -> Fraction:
        return _sheet_covariance(rules)


@functools.cache
def _sheet_variance(rules: HouseRules) -> Fraction:
    # Imported here: the PAR sheet's counting tables are only for a report that needs them.
    from gnau_service.rules.par import par_sheet  # noqa: PLC0415

    return par_sheet(rules).variance


@functools.cache
def _sheet_covariance(rules: HouseRules) -> Fraction:
    from gnau_service.rules.par_seats import seat_covariance  # noqa: PLC0415

    return seat_covariance(rules)


@dataclass(frozen=True)
class RowFigures:
    """A row's sums and what follows from them, exact where exact (None without stakes)."""

    key: RowKey
    sums: RowSums
    actual_rtp: Fraction | None
    hands_rtp: Fraction | None
    exact_rtp: Fraction
    #: The standard error of ``hands_rtp`` about ``exact_rtp``: the square root of
    #: ``variance_of_hands_rtp``, computed to 40 significant digits.
    variance_of_hands_rtp: Fraction | None
    standard_error: Decimal | None
    z_score: Decimal | None


@dataclass
class _Open:
    """A round committed and not yet finished, as far as the report needs it."""

    #: The commitment's ``operator`` member, None where it has none.
    stated_operator: str | None
    table_id: str
    currency: str
    rules: HouseRules
    dealt: bool = False

    @property
    def operator(self) -> str:
        return DEFAULT_OPERATOR if self.stated_operator is None else self.stated_operator


@dataclass
class LogReport:
    """Rows of sums from entries added in log order.

    ``since`` and ``until`` (UTC dates, both included) keep only the rounds whose final entry
    falls on or between them; ``operators`` (if given) only those operators' rounds; ``tables``
    (if given) only the rounds of those tables, at whichever operator. ``partial``: the
    entries start after the log's first, so a round's final entry may come without its
    commitment; such rounds are counted in :attr:`rounds_outside` rather than refused."""

    period: Period
    since: date | None = None
    until: date | None = None
    operators: frozenset[str] | None = None
    tables: frozenset[str] | None = None
    partial: bool = False
    sums: dict[RowKey, RowSums] = field(default_factory=dict)
    entries: int = 0
    #: Rounds whose commitment came before the entries read (a bundle starting mid-log).
    rounds_outside: int = 0
    _open: dict[str, _Open] = field(default_factory=dict)
    _finished: set[str] = field(default_factory=set)

    @property
    def rounds_open(self) -> int:
        """Rounds committed and not yet settled or voided: not in any row."""
        return len(self._open)

    def add_all(self, entries: Iterable[LogEntry]) -> LogReport:
        for entry in entries:
            self.add(entry)
        return self

    def add(self, entry: LogEntry) -> None:
        self.entries += 1
        kind, round_id = entry.kind, entry.round_id
        if not kind.is_round_event or round_id is None:
            return
        if kind is EntryKind.ROUND_COMMITTED:
            self._commit(entry, round_id)
            return
        state = self._open.get(round_id)
        if state is None:
            if self.partial and round_id not in self._finished:
                if kind in _FINAL_KINDS:
                    self.rounds_outside += 1
                    self._finished.add(round_id)
                return
            raise ReportError(f"round {round_id}: {kind} without an open round", entry.index)
        stated = _stated_operator(entry, round_id)
        if stated != state.stated_operator:
            raise ReportError(
                f"round {round_id}: {kind} {_naming(stated)}, but the round's commitment"
                f" {_naming(state.stated_operator)}",
                entry.index,
            )
        if kind is EntryKind.ROUND_DEALT:
            state.dealt = True
        elif kind in _FINAL_KINDS:
            del self._open[round_id]
            self._finished.add(round_id)
            self._finish(entry, round_id, state)

    def _commit(self, entry: LogEntry, round_id: str) -> None:
        if round_id in self._open or round_id in self._finished:
            raise ReportError(f"round {round_id} is committed twice", entry.index)
        table_id = entry.payload.get("table_id")
        if not isinstance(table_id, str):
            raise ReportError(
                f"round {round_id}: table_id must be a string, not {quoted(table_id)}", entry.index
            )
        house_rules = entry.payload.get("house_rules")
        try:
            if not isinstance(house_rules, dict):
                raise RulesError(f"house_rules is {quoted(house_rules)}, not an object")
            rules = _rules_of(json.dumps(house_rules, sort_keys=True))
        except RulesError as error:
            raise ReportError(f"round {round_id}: {error}", entry.index) from None
        currency = entry.payload.get(CURRENCY_FIELD)
        if currency is None:
            code = NO_CURRENCY_CODE
        else:
            try:
                code = Currency.from_json(currency).code
            except ValueError as error:
                raise ReportError(f"round {round_id}: {error}", entry.index) from None
        self._open[round_id] = _Open(_stated_operator(entry, round_id), table_id, code, rules)

    def _finish(self, entry: LogEntry, round_id: str, state: _Open) -> None:
        moment = parse_utc_timestamp(entry.time)
        day = moment.date()
        if (self.since is not None and day < self.since) or (
            self.until is not None and day > self.until
        ):
            return
        if self.operators is not None and state.operator not in self.operators:
            return
        if self.tables is not None and state.table_id not in self.tables:
            return
        key = RowKey(
            moment.strftime(_PERIOD_FORMATS[self.period]),
            state.operator,
            state.table_id,
            state.currency,
            _rules_text(state.rules),
            state.rules,
        )
        payload = entry.payload
        # Read first, so that an entry refused leaves every row as it was.
        if entry.kind is EntryKind.ROUND_SETTLED:
            hands = paid = _seats(payload.get("players"), round_id, entry.index)
        elif state.dealt:
            hands, paid = _void_seats(payload, round_id, entry.index)
        else:
            hands = paid = []
        sums = self.sums.get(key)
        if sums is None:
            sums = self.sums[key] = RowSums()
        if entry.kind is EntryKind.ROUND_SETTLED:
            sums.rounds_settled += 1
            sums.seats_settled += len(hands)
        elif state.dealt:
            sums.rounds_voided_after_deal += 1
            sums.seats_voided_after_deal += len(hands)
        else:
            sums.rounds_voided_before_deal += 1
        _add_seats(sums, hands, paid)

    def rows(self, figures: ExactFigures | None = None) -> list[RowFigures]:
        """Every row, sorted by period, operator, table, currency and rule set, with its
        figures."""
        figures = figures or ParSheetFigures()
        return [row_figures(key, self.sums[key], figures) for key in sorted(self.sums)]


_FINAL_KINDS: Final = (EntryKind.ROUND_SETTLED, EntryKind.ROUND_VOIDED)


def _stated_operator(entry: LogEntry, round_id: str) -> str | None:
    """The operator a round entry names, None when it names none (an entry written before
    operators existed: its round is :data:`DEFAULT_OPERATOR`'s)."""
    operator = entry.payload.get(OPERATOR_FIELD)
    if operator is None and OPERATOR_FIELD not in entry.payload:
        return None
    problem = check_operator(operator)
    if problem is not None:
        raise ReportError(f"round {round_id}: {problem}", entry.index)
    assert isinstance(operator, str)
    return operator


def _naming(stated: str | None) -> str:
    return "names no operator" if stated is None else f"names operator {quoted(stated)}"


@functools.lru_cache(maxsize=4096)
def _rules_of(house_rules_json: str) -> HouseRules:
    """A committed ``house_rules`` read once per distinct text: a log holds few rule sets."""
    return HouseRules.from_mapping(json.loads(house_rules_json))


@functools.lru_cache(maxsize=4096)
def _rules_text(rules: HouseRules) -> tuple[str, ...]:
    return tuple(rules.as_text().values())


#: A seat as the report reads it: its seat number, stake and delta.
_Seat = tuple[int, int, int]


def _seats(players: JsonValue, round_id: str, index: int) -> list[_Seat]:
    """The seat, stake and delta of each item of a settlement's ``players``."""
    if not isinstance(players, list):
        raise ReportError(f"round {round_id}: players must be a list", index)
    seats = []
    for player in players:
        values = (
            [player.get(name) for name in ("seat", "stake", "delta")]
            if isinstance(player, dict)
            else []
        )
        if len(values) != 3 or not all(type(value) is int for value in values):
            raise ReportError(
                f"round {round_id}: each player must carry integer seat, stake and delta, not "
                f"{quoted(player)}",
                index,
            )
        seat, stake, delta = values
        assert isinstance(seat, int) and isinstance(stake, int) and isinstance(delta, int)
        if stake <= 0:
            raise ReportError(
                f"round {round_id}: seat {seat}'s stake {stake} is not positive", index
            )
        seats.append((seat, stake, delta))
    return seats


def _void_seats(
    payload: dict[str, JsonValue], round_id: str, index: int
) -> tuple[list[_Seat], list[_Seat]]:
    """A void after the deal's seats: as its ``result`` (the hands) and as it ``paid``."""
    result, paid = payload.get("result"), payload.get("paid")
    if not isinstance(result, dict) or not isinstance(paid, dict):
        raise ReportError(
            f"round {round_id}: a void after the deal must carry its result and paid", index
        )
    hands = _seats(result.get("players"), round_id, index)
    paid_seats = _seats(paid.get("players"), round_id, index)
    if [seat[0] for seat in hands] != [seat[0] for seat in paid_seats] or any(
        hand[1] != seat[1] for hand, seat in zip(hands, paid_seats, strict=True)
    ):
        raise ReportError(
            f"round {round_id}: the void's result and paid are not of the same seats and stakes",
            index,
        )
    return hands, paid_seats


def _add_seats(sums: RowSums, hands: list[_Seat], paid: list[_Seat]) -> None:
    """Add one round's seats: ``hands`` as the hands earned, ``paid`` as they were paid (the
    same list for a settlement)."""
    round_stake = 0
    for (_, stake, hand_delta), (_, _, paid_delta) in zip(hands, paid, strict=True):
        sums.stakes += stake
        sums.returned += stake + paid_delta
        sums.hands_returned += stake + hand_delta
        sums.stake_squares += stake * stake
        round_stake += stake
    sums.stake_pairs += round_stake * round_stake - sum(stake * stake for _, stake, _ in hands)


def row_figures(key: RowKey, sums: RowSums, figures: ExactFigures) -> RowFigures:
    """A row's figures (docs/reports.md, *How each figure is computed*)."""
    exact = figures.rtp(key.rules)
    if sums.stakes == 0:
        return RowFigures(key, sums, None, None, exact, None, None, None)
    stakes = Fraction(sums.stakes)
    actual = sums.returned / stakes
    hands = sums.hands_returned / stakes
    spread = figures.variance(key.rules) * sums.stake_squares
    if sums.stake_pairs:
        spread += figures.covariance(key.rules) * sums.stake_pairs
    variance = spread / stakes**2
    error = _sqrt(variance)
    z = _decimal(hands - exact) / error if error else None
    return RowFigures(key, sums, actual, hands, exact, variance, error, z)


def _decimal(value: Fraction) -> Decimal:
    context = Context(prec=_SQRT_DIGITS)
    return context.divide(Decimal(value.numerator), Decimal(value.denominator))


def _sqrt(value: Fraction) -> Decimal:
    return _decimal(value).sqrt(Context(prec=_SQRT_DIGITS))


# -- output forms ----------------------------------------------------------------------------------

#: The CSV columns, in order (docs/reports.md describes each).
CSV_COLUMNS: Final = (
    "period",
    "operator",
    "table_id",
    "currency",
    *HouseRules().as_dict(),
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
)

#: The columns after the key's: a row's figures.
_FIGURE_COLUMNS: Final = CSV_COLUMNS[CSV_COLUMNS.index("rounds_settled") :]


def rate_text(value: Fraction | Decimal | None, places: int = DECIMAL_PLACES) -> str | None:
    """``value`` rounded to ``places`` (to nearest, ties to even), or None.

    >>> rate_text(Fraction(1, 3)), rate_text(Decimal("-1.23456"), 3), rate_text(None)
    ('0.333333', '-1.235', None)
    """
    if value is None:
        return None
    number = _decimal(value) if isinstance(value, Fraction) else value
    return str(number.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN))


def _row_values(row: RowFigures) -> dict[str, str | int | None]:
    sums = row.sums
    return {
        "rounds_settled": sums.rounds_settled,
        "rounds_voided_before_deal": sums.rounds_voided_before_deal,
        "rounds_voided_after_deal": sums.rounds_voided_after_deal,
        "seats": sums.seats,
        "stakes": sums.stakes,
        "returned": sums.returned,
        "actual_rtp": rate_text(row.actual_rtp),
        "hands_returned": sums.hands_returned,
        "hands_rtp": rate_text(row.hands_rtp),
        "exact_rtp": rate_text(row.exact_rtp),
        "standard_error": rate_text(row.standard_error),
        "z_score": rate_text(row.z_score, Z_PLACES),
    }


def csv_text(rows: Iterable[RowFigures]) -> str:
    """The report as CSV: a header of :data:`CSV_COLUMNS`, then a line per row; an empty field
    where a figure has no value (a row without stakes)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        values = _row_values(row)
        writer.writerow(
            [
                row.key.period,
                row.key.operator,
                row.key.table_id,
                row.key.currency,
                *row.key.rules_text,
                *("" if values[name] is None else values[name] for name in _FIGURE_COLUMNS),
            ]
        )
    return out.getvalue()


def json_document(report: LogReport, rows: Iterable[RowFigures]) -> dict[str, JsonValue]:
    """The report as one JSON object: what was read, then the rows, each with its figures as
    decimals and, for the rates, also exactly (``numerator/denominator``)."""
    return {
        "format": REPORT_FORMAT,
        "period": str(report.period),
        "since": None if report.since is None else report.since.isoformat(),
        "until": None if report.until is None else report.until.isoformat(),
        "operators": (
            None if report.operators is None else list[JsonValue](sorted(report.operators))
        ),
        "tables": None if report.tables is None else list[JsonValue](sorted(report.tables)),
        "entries": report.entries,
        "rounds_open": report.rounds_open,
        "rounds_outside": report.rounds_outside,
        "rows": [_row_json(row) for row in rows],
    }


def _row_json(row: RowFigures) -> dict[str, JsonValue]:
    exact: dict[str, JsonValue] = {
        "actual_rtp": _fraction_or_none(row.actual_rtp),
        "hands_rtp": _fraction_or_none(row.hands_rtp),
        "exact_rtp": fraction_text(row.exact_rtp),
        "variance_of_hands_rtp": _fraction_or_none(row.variance_of_hands_rtp),
    }
    return {
        "period": row.key.period,
        "operator": row.key.operator,
        "table_id": row.key.table_id,
        "currency": row.key.currency,
        "house_rules": dict(row.key.rules.as_dict()),
        **_row_values(row),
        "exact": exact,
    }


def _fraction_or_none(value: Fraction | None) -> str | None:
    return None if value is None else fraction_text(value)


def json_text(report: LogReport, rows: Iterable[RowFigures]) -> str:
    return json.dumps(json_document(report, rows), indent=2) + "\n"
