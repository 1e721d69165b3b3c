"""The disclosed return to player of a rule set: what a lobby shows and a round's log carries.

The figures are the PAR sheet's (:func:`gnau_service.rules.par.par_sheet`, docs/par.md), per
unit stake for one player seat against the dealer: ``rtp = 1 + E[X]`` and ``house_edge = 1 -
rtp``, ``X`` being the player's result of a round. Each is given two ways, as JSON strings:

- exact: ``"numerator/denominator"`` in lowest terms, the denominator positive, always with the
  slash (``"1/1"``); the numbers can exceed 2^53, which is why they are text;
- decimal: rounded to :data:`DECIMAL_PLACES` places (to nearest, ties to even), with a sign only
  when negative (a house edge below zero favours the player): ``"0.948173"``.

>>> figures = ReturnToPlayer(Fraction(9, 10))
>>> figures.to_json()
{'rtp': '9/10', 'house_edge': '1/10', 'rtp_decimal': '0.900000', 'house_edge_decimal': '0.100000'}
>>> ReturnToPlayer.from_json(figures.to_json()) == figures
True
>>> ReturnToPlayer(Fraction(2000001, 2000000)).to_json()["house_edge_decimal"]
'-0.000000'

Every rule set's figures are shipped, never computed at play time: :data:`TABLE`, beside this
module, holds the exact return to player of every rule set
(:func:`~gnau_service.rules.house_rules.every_rule_set`), as its PAR sheet gives it.
``make rtp-table`` (bench/rtp_table.py) writes it from the sheets; tests/rules/test_rtp_table.py
recomputes a sample (all of it under ``make test-slow``) and holds it to the sheets published in
docs/par/. :meth:`ReturnToPlayer.of_rules` reads it.

>>> ReturnToPlayer.of_rules(HouseRules()).to_json()["rtp_decimal"]
'0.948173'
"""

from __future__ import annotations

import csv
import functools
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from importlib import resources
from typing import Final

from gnau_service.common.quoting import quoted
from gnau_service.rules.errors import RulesError
from gnau_service.rules.house_rules import HouseRules, every_rule_set

#: Places after the decimal point of the decimal forms.
DECIMAL_PLACES: Final = 6
#: The JSON members, in the order written.
MEMBERS: Final = ("rtp", "house_edge", "rtp_decimal", "house_edge_decimal")
_FRACTION: Final = re.compile(r"(-?(?:0|[1-9][0-9]*))/([1-9][0-9]*)")
#: Digits a numerator or denominator may have: far beyond any PAR sheet's (C(416, 5) x C(411, 5)
#: deals with eight decks has 21), short enough that reading one costs nothing.
_MAX_DIGITS: Final = 64
#: The shipped table of every rule set's exact return to player, a file of this package.
TABLE: Final = "return_to_player.csv"
#: Its first line, a comment that says what it is to whoever opens it.
TABLE_COMMENT: Final = (
    "# The exact return to player per unit stake of every rule set, from its PAR sheet"
    " (docs/par.md). Written by `make rtp-table`; do not edit."
)
#: Its header: every house rule, in declaration order, then the exact return to player.
TABLE_COLUMNS: Final = (*HouseRules().as_dict(), "rtp")


class ReturnToPlayerError(RulesError):
    """Figures that are not in the disclosed form, or that do not agree with each other."""


@dataclass(frozen=True, slots=True)
class ReturnToPlayer:
    """A rule set's exact return to player per unit stake, and its house edge."""

    rtp: Fraction
    #: The JSON form's members, written once: every round's record, log entry and answers carry
    #: its rule set's figures, and writing the large fractions out cost more than a step's SQL.
    _json: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        house_edge = self.house_edge
        members = {
            "rtp": fraction_text(self.rtp),
            "house_edge": fraction_text(house_edge),
            "rtp_decimal": decimal_text(self.rtp),
            "house_edge_decimal": decimal_text(house_edge),
        }
        object.__setattr__(self, "_json", members)

    @property
    def house_edge(self) -> Fraction:
        return 1 - self.rtp

    @classmethod
    def of_rules(cls, rules: HouseRules) -> ReturnToPlayer:
        """The figures of ``rules``, as their PAR sheet gives them: a look-up in :data:`TABLE`
        (read once, at the first call)."""
        return _shipped()[rules]

    def to_json(self) -> dict[str, str]:
        return dict(self._json)  # the caller's own: it may change it

    @classmethod
    def from_json(cls, value: object) -> ReturnToPlayer:
        """Read the JSON form, refusing any other shape and figures that disagree."""
        if not isinstance(value, dict) or set(value) != set(MEMBERS):
            raise ReturnToPlayerError(
                f"return_to_player must be an object of exactly {', '.join(MEMBERS)}, "
                f"got {quoted(value)}"
            )
        figures = cls(read_fraction(value["rtp"], "rtp"))
        if figures.to_json() != value:
            raise ReturnToPlayerError(
                f"return_to_player does not agree with itself: {quoted(value, limit=200)}"
            )
        return figures


def fraction_text(value: Fraction) -> str:
    """``numerator/denominator``, always with the slash."""
    return f"{value.numerator}/{value.denominator}"


def decimal_text(value: Fraction) -> str:
    """``value`` rounded to :data:`DECIMAL_PLACES` decimal places (to nearest, ties to even).

    >>> decimal_text(Fraction(-1, 8)), decimal_text(Fraction(1))
    ('-0.125000', '1.000000')
    >>> decimal_text(Fraction(1, 2 * 10**6)), decimal_text(Fraction(3, 2 * 10**6))
    ('0.000000', '0.000002')
    """
    scaled = round(abs(value) * 10**DECIMAL_PLACES)
    whole, part = divmod(scaled, 10**DECIMAL_PLACES)
    return f"{'-' if value < 0 else ''}{whole}.{part:0{DECIMAL_PLACES}d}"


def read_fraction(text: object, name: str) -> Fraction:
    """A fraction in the exact form, refusing any other spelling."""
    match = _FRACTION.fullmatch(text) if isinstance(text, str) else None
    if match is None or len(text) > 2 * _MAX_DIGITS + 2:  # type: ignore[arg-type]
        raise ReturnToPlayerError(
            f"{name} must be 'numerator/denominator' in lowest terms, got {quoted(text)}"
        )
    value = Fraction(int(match[1]), int(match[2]))
    if fraction_text(value) != text:
        raise ReturnToPlayerError(f"{name} must be in lowest terms, got {quoted(text)}")
    return value


def table_text(figures: Mapping[HouseRules, Fraction]) -> str:
    """The text of :data:`TABLE`: the comment, the header, then one row for each rule set in
    :func:`~gnau_service.rules.house_rules.every_rule_set` order, each rule's value as
    ``--rule`` takes it and the exact return to player. ``figures`` must hold every rule set."""
    out = io.StringIO()
    out.write(TABLE_COMMENT + "\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TABLE_COLUMNS)
    for rules in every_rule_set():
        writer.writerow([*rules.as_text().values(), fraction_text(figures[rules])])
    return out.getvalue()


def read_table(text: str) -> dict[HouseRules, Fraction]:
    """Read :data:`TABLE`'s text, refusing anything but :func:`table_text`'s exact form: every
    rule set once, in order, each figure in lowest terms."""
    lines = text.split("\n")
    if lines[0] != TABLE_COMMENT or lines[-1] != "":
        raise ReturnToPlayerError("the table must start with its comment and end with a newline")
    rows = list(csv.reader(lines[1:-1]))
    if not rows or tuple(rows[0]) != TABLE_COLUMNS:
        raise ReturnToPlayerError(f"the table's header must be {','.join(TABLE_COLUMNS)}")
    rule_sets = every_rule_set()
    if len(rows) - 1 != len(rule_sets):
        raise ReturnToPlayerError(
            f"the table must have a row for each of the {len(rule_sets)} rule sets,"
            f" got {len(rows) - 1} rows"
        )
    figures = {}
    for number, (rules, row) in enumerate(zip(rule_sets, rows[1:], strict=True), start=3):
        if row[:-1] != list(rules.as_text().values()):
            raise ReturnToPlayerError(
                f"line {number} of the table must be the rule set {quoted(rules.as_text())},"
                f" got {quoted(row, limit=200)}"
            )
        figures[rules] = read_fraction(row[-1], f"the rtp of line {number}")
    return figures


@functools.cache
def _shipped() -> dict[HouseRules, ReturnToPlayer]:
    text = (resources.files("gnau_service.rules") / TABLE).read_text(encoding="ascii")
    return {rules: ReturnToPlayer(rtp) for rules, rtp in read_table(text).items()}
