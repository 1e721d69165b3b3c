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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from gnau_service.rules.errors import RulesError, quoted
from gnau_service.rules.house_rules import HouseRules

#: Places after the decimal point of the decimal forms.
DECIMAL_PLACES: Final = 6
#: The JSON members, in the order written.
MEMBERS: Final = ("rtp", "house_edge", "rtp_decimal", "house_edge_decimal")
_FRACTION: Final = re.compile(r"(-?(?:0|[1-9][0-9]*))/([1-9][0-9]*)")
#: Digits a numerator or denominator may have: far beyond any PAR sheet's (C(416, 5) x C(411, 5)
#: deals with eight decks has 21), short enough that reading one costs nothing.
_MAX_DIGITS: Final = 64
#: The default rules' exact return to player, as their PAR sheet gives it (docs/par/default.md).
#: Known without the sheet's second of CPU, since every server start and nearly every Shuffle
#: asks for it; tests/rules/test_return_to_player.py recomputes it.
DEFAULT_RULES_RTP: Final = Fraction(57273199987, 60403728840)


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
        """The PAR sheet's figure for ``rules``: seconds the first time, cached after (the
        default rules' is known)."""
        if rules == HouseRules():
            return cls(DEFAULT_RULES_RTP)
        # Imported here: reading and checking figures (replay, receipts) needs none of it.
        from gnau_service.rules.par import par_sheet  # noqa: PLC0415

        return cls(par_sheet(rules).rtp)

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
