"""Errors of the rules core. Each names the input that caused it.

Messages quote bad input through :func:`~gnau_service.common.quoting.quoted`, so that no
input, however long, makes a message long.
"""

from __future__ import annotations


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
