"""How far a witness's clock stands from the dealer's, read from the time in its cosignature.

Every log entry carries the dealer's time (its clock's claim: :mod:`~gnau_service.audit.entries`),
and every ``cosignature/v1`` carries the witness's, in whole seconds
(:mod:`~gnau_service.audit.cosignature`). A witness signs between the moment the dealer sends it a
checkpoint and the moment the answer arrives, so each cosignature is a reading of the witness's
clock against the dealer's, with the round trip as its uncertainty.

**The interval.** Let the witness's clock read the dealer's plus ``offset``. The dealer reads its
clock at ``sent``, just before it sends, and at ``received``, once the answer is in. The witness
signed at some dealer time ``d`` in ``[sent, received]`` and wrote ``T = floor(d + offset)``
(whole seconds, cut as ``int(time.time())`` and Go's ``Unix()`` cut), so ``T <= d + offset < T +
1`` and

    ``T - received <= offset < T + 1 - sent``.

The estimate is the interval's middle, ``T + 0.5 - (sent + received) / 2``, and its uncertainty
half the interval's width, ``(received - sent + 1) / 2``. A clock is said to *drift* only when
the whole interval lies beyond the bound: a slow answer widens the interval and never raises an
alarm by itself.

**Entries.** The entries a checkpoint covers were stamped before it was signed, so none can
truly be later than the cosignature: an entry time past ``T + 1`` by more than the bound is a
clock that runs ahead (a replica's, or the dealer's stepping back and forth), or a witness
behind.

>>> offset = cosignature_offset(1_700_000_060, sent=1_700_000_000.2, received=1_700_000_000.4)
>>> round(offset.low, 3), round(offset.high, 3), round(offset.estimate, 3)
(59.6, 60.8, 60.2)
>>> drift(offset, bound=5.0)
<Drift.WITNESS_AHEAD: 'witness_ahead'>
>>> drift(cosignature_offset(1_700_000_000, 1_700_000_000.2, 1_700_000_000.4), bound=5.0)
<Drift.NONE: 'none'>
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

#: Seconds a witness's clock may stand from the dealer's, and an entry's time past a cosignature
#: of its checkpoint, before either counts as drift: well beyond what NTP keeps (milliseconds),
#: well within what a regulator's "accurate time stamps" tolerate.
DEFAULT_BOUND_SECONDS: Final = 5.0
#: The resolution of a cosignature's time: whole seconds.
COSIGNATURE_RESOLUTION_SECONDS: Final = 1.0


class Drift(StrEnum):
    """What one cosignature says of the clocks (the log line's ``drift``)."""

    NONE = "none"
    #: The witness's clock is ahead of the dealer's by more than the bound, for certain.
    WITNESS_AHEAD = "witness_ahead"
    #: The witness's clock is behind the dealer's by more than the bound, for certain.
    WITNESS_BEHIND = "witness_behind"
    #: The checkpoint's newest entry claims a time past the cosignature by more than the bound.
    ENTRIES_AHEAD = "entries_ahead"


@dataclass(frozen=True)
class ClockOffset:
    """The witness's clock less the dealer's, in seconds: every value in ``[low, high]`` fits
    what was seen."""

    low: float
    high: float

    @property
    def estimate(self) -> float:
        """The interval's middle."""
        return (self.low + self.high) / 2

    @property
    def uncertainty(self) -> float:
        """Half the interval's width: the estimate is right to within this.

        >>> cosignature_offset(100, sent=99.0, received=101.0).uncertainty
        1.5
        """
        return (self.high - self.low) / 2


def cosignature_offset(cosigned_at: int, sent: float, received: float) -> ClockOffset:
    """The witness's clock offset from a cosignature's time ``cosigned_at`` (whole POSIX
    seconds) and the dealer's times before sending and after receiving (POSIX seconds).

    >>> cosignature_offset(1_000, sent=1_000.0, received=1_000.0)
    ClockOffset(low=0.0, high=1.0)
    >>> cosignature_offset(1_000, sent=1_000.5, received=1_000.0)
    Traceback (most recent call last):
    ...
    ValueError: received (1000.0) is before sent (1000.5)
    """
    if not (math.isfinite(sent) and math.isfinite(received)):
        raise ValueError("sent and received must be finite times")
    if received < sent:
        raise ValueError(f"received ({received}) is before sent ({sent})")
    return ClockOffset(
        low=cosigned_at - received, high=cosigned_at + COSIGNATURE_RESOLUTION_SECONDS - sent
    )


def entry_lead(entry_time: float, cosigned_at: int) -> float:
    """Seconds by which an entry's time (POSIX) lies past the last instant a cosignature of a
    checkpoint covering it can have been made (``cosigned_at`` plus the 1 s resolution);
    negative when it lies before, as it should.

    >>> entry_lead(1_000.25, cosigned_at=1_000)
    -0.75
    >>> entry_lead(1_010.0, cosigned_at=1_000)
    9.0
    """
    return entry_time - (cosigned_at + COSIGNATURE_RESOLUTION_SECONDS)


def drift(offset: ClockOffset, bound: float, newest_entry_lead: float | None = None) -> Drift:
    """Whether a reading shows drift beyond ``bound`` seconds: the whole offset interval past
    it on either side (the witness's clock), else the checkpoint's newest entry past the
    cosignature by more than it (the entries' clock).

    >>> behind = cosignature_offset(1_000 - 60, sent=1_000.0, received=1_000.1)
    >>> drift(behind, 5.0)
    <Drift.WITNESS_BEHIND: 'witness_behind'>
    >>> on_time = cosignature_offset(1_000, sent=1_000.0, received=1_000.1)
    >>> drift(on_time, 5.0, newest_entry_lead=entry_lead(1_030.0, 1_000))
    <Drift.ENTRIES_AHEAD: 'entries_ahead'>
    >>> slow = cosignature_offset(1_008, sent=1_000.0, received=1_004.0)  # a 4 s round trip
    >>> drift(slow, 5.0)  # 6.5 s is the estimate, but 4 s fits what was seen too
    <Drift.NONE: 'none'>
    """
    if bound < 0:
        raise ValueError(f"the bound must be 0 or more, not {bound}")
    if offset.low > bound:
        return Drift.WITNESS_AHEAD
    if offset.high < -bound:
        return Drift.WITNESS_BEHIND
    if newest_entry_lead is not None and newest_entry_lead > bound:
        return Drift.ENTRIES_AHEAD
    return Drift.NONE
