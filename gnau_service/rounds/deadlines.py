"""When the service completes a round that nobody else does: its deal and settle deadlines.

No round is left open (UKGC RTS 10, GLI-19's incomplete games). A round shuffled but not dealt
within the *deal deadline* is voided by the service (nothing is staked yet); a round dealt but
not settled within the *settle deadline* is revealed and settled by the service, at the result
its hands earn, exactly as ``Settle`` would. :mod:`~gnau_service.rounds.completion` does it.

The defaults, and why:

- deal: 10 minutes. Nothing is staked before the deal, and a table holds one open round, so an
  abandoned shuffle blocks its table; a betting window is well under a minute, and ten minutes
  cover a platform's restart.
- settle: 60 minutes. Money is at stake: the platform gets an hour to recover its wallet and
  settle the round itself, the auto-resolution period game providers use (PG Soft's default);
  after that the player is paid the fair result rather than left waiting.

>>> deadlines = Deadlines(deal_seconds=600, settle_seconds=3600)
>>> deadlines.deal_due("2026-12-05T12:00:00.000000Z")
'2026-12-05T12:10:00.000000Z'
>>> deadlines.settle_due("2026-12-05T23:30:00.500000Z")
'2026-12-06T00:30:00.500000Z'
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from gnau_service.audit.timestamps import format_utc_timestamp, parse_utc_timestamp

DEFAULT_DEAL_DEADLINE_SECONDS: Final = 600
DEFAULT_SETTLE_DEADLINE_SECONDS: Final = 3600
#: Either deadline is 1 second to 7 days.
MIN_DEADLINE_SECONDS: Final = 1
MAX_DEADLINE_SECONDS: Final = 7 * 24 * 3600


@dataclass(frozen=True)
class Deadlines:
    """How long a round may stay shuffled, and dealt, before the service completes it."""

    deal_seconds: int = DEFAULT_DEAL_DEADLINE_SECONDS
    settle_seconds: int = DEFAULT_SETTLE_DEADLINE_SECONDS

    def __post_init__(self) -> None:
        for name in ("deal_seconds", "settle_seconds"):
            value = getattr(self, name)
            if not MIN_DEADLINE_SECONDS <= value <= MAX_DEADLINE_SECONDS:
                raise ValueError(
                    f"{name} must be {MIN_DEADLINE_SECONDS} to {MAX_DEADLINE_SECONDS} seconds,"
                    f" not {value}"
                )

    def deal_due(self, shuffled_at: str) -> str:
        """The deal deadline of a round shuffled at ``shuffled_at`` (the log's time form)."""
        return _later(shuffled_at, self.deal_seconds)

    def settle_due(self, dealt_at: str) -> str:
        """The settle deadline of a round dealt at ``dealt_at`` (the log's time form)."""
        return _later(dealt_at, self.settle_seconds)


def _later(time: str, seconds: int) -> str:
    return format_utc_timestamp(parse_utc_timestamp(time) + timedelta(seconds=seconds))
