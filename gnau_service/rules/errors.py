"""Errors of the rules core. Each names the input that caused it.

Messages quote bad input through :func:`quoted`, so that no input, however long, makes a
message long: every layer's errors use it.
"""

from __future__ import annotations

from typing import Final

#: Characters of a quoted value kept before it is cut.
QUOTED_CHARS: Final = 40


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """``repr(value)``, cut after ``limit`` characters with a marker saying how much was left out.

    >>> quoted("KS")
    "'KS'"
    >>> quoted("x" * 1000, limit=8)
    "'xxxxxx…(+995 chars)"
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}…(+{len(text) - limit + 1} chars)"


class RulesError(ValueError):
    """Bad input to the rules core; the message says what is wrong and with which value."""


class CardError(RulesError):
    """A card token that is not a card, or cards that cannot all come from the decks in play."""

    def __init__(self, message: str, *, token: str | None = None) -> None:
        super().__init__(message)
        self.token = token


class HouseRulesError(RulesError):
    """An unknown house-rule key or a value the key does not accept."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class SettlementError(RulesError):
    """A table that cannot be settled: bad seat, bad stake, or cards the decks cannot hold."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field
