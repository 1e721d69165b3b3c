"""The errors of the fairness library. Each one names the field that caused it.

>>> error = LockError("seat 3: stake must be an integer from 1 to 9, got 0", field="stake")
>>> isinstance(error, ValueError), error.field
(True, 'stake')
"""

from __future__ import annotations


class FairnessError(ValueError):
    """Bad input to the fairness library; ``field`` names the input that is wrong."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class CommitError(FairnessError):
    """A round id, server seed or commitment that has the wrong type or size."""


class LockError(FairnessError):
    """A seat or beacon that cannot be locked: bad seat number, player id, stake or seed."""


class DealError(FairnessError):
    """A round whose hands do not fit its decks."""


class DrbgError(FairnessError):
    """A request the HMAC_DRBG refuses: short entropy or nonce, oversized request, reseed due."""


class RevealFormatError(FairnessError):
    """The JSON form of a revealed round that cannot be read: a missing or malformed field."""
