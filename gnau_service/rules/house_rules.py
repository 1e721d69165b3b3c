"""House rules: the configurable readings of the game, as one frozen, validated value.

>>> rules = HouseRules()
>>> rules.tie, rules.payout, rules.decks
(<TieRule.DEALER: 'dealer'>, <PayoutTable.POINTS: 'points'>, 1)
>>> HouseRules.from_assignments(["ten_is_duke=true", "tie=push"]).as_dict()["tie"]
'push'
>>> HouseRules.from_mapping({"decks": 0})
Traceback (most recent call last):
...
gnau_service.rules.errors.HouseRulesError: house rule 'decks' must be an integer from 1 to 8, got 0
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from gnau_service.common.quoting import quoted
from gnau_service.rules.errors import HouseRulesError

MAX_DECKS: Final = 8


class TieRule(StrEnum):
    """Who takes a pair of equal hands (Five Dukes against Five Dukes is always a tie)."""

    DEALER = "dealer"
    PUSH = "push"
    HIGH_CARD = "high_card"


class PayoutTable(StrEnum):
    """Which payout table prices each category."""

    POINTS = "points"
    MULTIPLIER = "multiplier"


@dataclass(frozen=True, slots=True)
class HouseRules:
    """Every house rule of the rules page, with its default."""

    ten_is_duke: bool = False
    three_six_pair: bool = False
    trips_make_ox: bool = True
    five_small: bool = True
    tie: TieRule = TieRule.DEALER
    payout: PayoutTable = PayoutTable.POINTS
    suited_double: bool = False
    decks: int = 1

    def __post_init__(self) -> None:
        for key in _BOOLEAN_KEYS:
            if not isinstance(getattr(self, key), bool):
                raise HouseRulesError(
                    f"house rule {key!r} must be true or false, got {getattr(self, key)!r}",
                    key=key,
                )
        for key, enum in (("tie", TieRule), ("payout", PayoutTable)):
            value = getattr(self, key)
            if not isinstance(value, enum):
                raise HouseRulesError(
                    f"house rule {key!r} must be one of {_choices(enum)}, got {quoted(value)}",
                    key=key,
                )
        if (
            not isinstance(self.decks, int)
            or isinstance(self.decks, bool)
            or not 1 <= self.decks <= MAX_DECKS
        ):
            raise HouseRulesError(
                f"house rule 'decks' must be an integer from 1 to {MAX_DECKS}, got {self.decks!r}",
                key="decks",
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> HouseRules:
        """Build from typed values (as in JSON): bools, ``tie``/``payout`` strings, ``decks`` int.

        Keys not given keep their defaults; unknown keys are refused.
        """
        fields: dict[str, object] = {}
        for key, value in values.items():
            if key not in _KEYS:
                raise HouseRulesError(
                    f"unknown house rule {quoted(key)} (known: {', '.join(_KEYS)})", key=key
                )
            if key == "tie":
                fields[key] = _enum_value(TieRule, key, value)
            elif key == "payout":
                fields[key] = _enum_value(PayoutTable, key, value)
            else:
                fields[key] = value
        return cls(**fields)  # type: ignore[arg-type]  # each value is checked in __post_init__

    @classmethod
    def from_assignments(cls, assignments: Iterable[str]) -> HouseRules:
        """Build from ``KEY=VALUE`` strings, as given on a command line."""
        values: dict[str, object] = {}
        for assignment in assignments:
            key, sep, text = assignment.partition("=")
            key = key.strip()
            if not sep:
                raise HouseRulesError(
                    f"house rule must be KEY=VALUE, got {quoted(assignment)}", key=key
                )
            values[key] = _parse_text(key, text.strip())
        return cls.from_mapping(values)

    def as_dict(self) -> dict[str, bool | str | int]:
        """The rules as plain JSON values, every key present, in declaration order."""
        return {
            key: str(value) if isinstance(value := getattr(self, key), StrEnum) else value
            for key in _KEYS
        }

    def as_text(self) -> dict[str, str]:
        """Each rule's value as ``from_assignments`` reads it (``true``, ``high_card``, ``8``),
        every key present, in declaration order."""
        return {
            key: str(value).lower() if isinstance(value, bool) else str(value)
            for key, value in self.as_dict().items()
        }


def every_rule_set() -> tuple[HouseRules, ...]:
    """Every rule set there is, once each, in one fixed order: the product of each rule's values
    in declaration order (false before true, enums as declared, decks ascending), the last rule
    varying fastest.

    >>> rules = every_rule_set()
    >>> len(rules), len(set(rules)), HouseRules() in rules
    (1536, 1536, True)
    >>> rules[0].as_text()["trips_make_ox"], rules[1].as_text()["decks"]
    ('false', '2')
    """
    values: dict[str, tuple[object, ...]] = {
        **{key: (False, True) for key in _BOOLEAN_KEYS},
        "tie": tuple(TieRule),
        "payout": tuple(PayoutTable),
        "decks": tuple(range(1, MAX_DECKS + 1)),
    }
    # A rule added without its values here fails at the first call (KeyError), not silently.
    return tuple(
        HouseRules(**dict(zip(_KEYS, combination, strict=True)))  # type: ignore[arg-type]
        for combination in itertools.product(*(values[key] for key in _KEYS))
    )


_KEYS: Final = tuple(field.name for field in dataclasses.fields(HouseRules))
_BOOLEAN_KEYS: Final = tuple(
    field.name for field in dataclasses.fields(HouseRules) if field.type == "bool"
)


def _choices(enum: type[StrEnum]) -> str:
    return "|".join(member.value for member in enum)


def _enum_value(enum: type[StrEnum], key: str, value: object) -> StrEnum:
    if isinstance(value, str):
        for member in enum:
            if member.value == value:
                return member
    raise HouseRulesError(
        f"house rule {key!r} must be one of {_choices(enum)}, got {quoted(value)}", key=key
    )


def _parse_text(key: str, text: str) -> object:
    """Turn the text of a ``KEY=VALUE`` into the value type the key takes."""
    if key in _BOOLEAN_KEYS:
        lowered = text.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise HouseRulesError(
            f"house rule {key!r} must be true or false, got {quoted(text)}", key=key
        )
    if key == "decks":
        try:
            return int(text)
        except ValueError:
            raise HouseRulesError(
                f"house rule 'decks' must be an integer from 1 to {MAX_DECKS}, got {quoted(text)}",
                key=key,
            ) from None
    return text
