"""A witness's clock offset from its cosignature's time (gnau_service/audit/clock_drift.py): the
interval with fixed numbers worked by hand, and its properties: it always holds the true offset,
and drift is declared only when every offset that fits lies beyond the bound. And the auditor's
side: a bundle's verification reports how far entries are stamped past pinned witnesses'
cosignatures of their checkpoints, and warns beyond the bound."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.clock_drift import (
    DEFAULT_BOUND_SECONDS,
    ClockOffset,
    Drift,
    cosignature_offset,
    drift,
    entry_lead,
)
from gnau_service.audit.cosignature import WitnessSigner, cosign, with_cosignatures
from gnau_service.audit.note import SignedNote
from tests.audit.logs import honest_log

NOW = 1_790_000_000.0  # 2026-09-21, a POSIX time


def test_a_witness_on_time_with_a_quick_answer_is_within_a_second() -> None:
    # Sent at .25, answered at .75, witness wrote the same whole second: offset in [-0.75, 0.75].
    offset = cosignature_offset(1_790_000_000, sent=NOW + 0.25, received=NOW + 0.75)
    assert offset == ClockOffset(low=-0.75, high=0.75)
    assert offset.estimate == 0.0
    assert offset.uncertainty == 0.75
    assert drift(offset, DEFAULT_BOUND_SECONDS) is Drift.NONE


@pytest.mark.parametrize(
    ("cosigned_at", "expected"),
    [
        (1_790_000_004, Drift.NONE),  # offset in [3.5, 4.9]: within 5 s
        (1_790_000_005, Drift.NONE),  # [4.5, 5.9]: 4.5 fits, so no alarm
        (1_790_000_006, Drift.WITNESS_AHEAD),  # [5.5, 6.9]: beyond 5 s whatever the truth
        (1_790_000_060, Drift.WITNESS_AHEAD),  # a minute ahead
        (1_789_999_995, Drift.NONE),  # [-5.5, -4.1]: -4.1 fits
        (1_789_999_994, Drift.WITNESS_BEHIND),  # [-6.5, -5.1]
        (1_789_999_940, Drift.WITNESS_BEHIND),  # a minute behind
    ],
)
def test_drift_is_declared_only_beyond_the_bound(cosigned_at: int, expected: Drift) -> None:
    offset = cosignature_offset(cosigned_at, sent=NOW + 0.1, received=NOW + 0.5)
    assert drift(offset, 5.0) is expected


def test_the_round_trip_is_the_uncertainty() -> None:
    # A 7 s round trip: the witness, 8 s ahead by its stamp's middle, may be only 1 s ahead.
    offset = cosignature_offset(1_790_000_011, sent=NOW, received=NOW + 7.0)
    assert (offset.low, offset.high) == (4.0, 12.0)
    assert (offset.estimate, offset.uncertainty) == (8.0, 4.0)
    assert drift(offset, 5.0) is Drift.NONE
    assert drift(offset, 3.5) is Drift.WITNESS_AHEAD


def test_an_entry_later_than_the_cosignature_by_more_than_the_bound_is_suspect() -> None:
    offset = cosignature_offset(1_790_000_000, sent=NOW, received=NOW + 0.2)
    assert entry_lead(NOW - 30.0, 1_790_000_000) == -31.0  # an old entry: as it should be
    assert entry_lead(NOW + 6.0, 1_790_000_000) == 5.0
    assert drift(offset, 5.0, newest_entry_lead=5.0) is Drift.NONE
    assert drift(offset, 5.0, newest_entry_lead=5.5) is Drift.ENTRIES_AHEAD
    # The witness's own drift is named first: it explains the entries too.
    late = cosignature_offset(1_789_999_900, sent=NOW, received=NOW + 0.2)
    assert drift(late, 5.0, newest_entry_lead=entry_lead(NOW, 1_789_999_900)) is (
        Drift.WITNESS_BEHIND
    )


def test_impossible_readings_are_refused() -> None:
    with pytest.raises(ValueError, match="before sent"):
        cosignature_offset(1, sent=2.0, received=1.0)
    with pytest.raises(ValueError, match="finite"):
        cosignature_offset(1, sent=math.nan, received=1.0)
    with pytest.raises(ValueError, match="0 or more"):
        drift(ClockOffset(0.0, 1.0), -1.0)


@given(
    true_offset=st.floats(-1e6, 1e6),
    sent=st.floats(1e9, 2e9),
    until_signed=st.floats(0, 30),
    until_received=st.floats(0, 30),
)
def test_the_interval_holds_the_true_offset(
    true_offset: float, sent: float, until_signed: float, until_received: float
) -> None:
    """A witness whose clock reads the dealer's plus ``true_offset``, signing at some moment
    between sending and receiving, and cutting its time to whole seconds."""
    signed = sent + until_signed
    received = signed + until_received
    cosigned_at = math.floor(signed + true_offset)
    offset = cosignature_offset(cosigned_at, sent, received)
    slack = 1e-6 * max(1.0, abs(sent))  # floating point at these magnitudes
    assert offset.low - slack <= true_offset <= offset.high + slack
    assert offset.uncertainty == pytest.approx((received - sent + 1) / 2, abs=slack)
    # So drift is never declared about a clock within the bound.
    if abs(true_offset) + slack <= 5.0:
        assert drift(offset, 5.0) is Drift.NONE


@given(low=st.floats(-1e4, 1e4), width=st.floats(0, 100), bound=st.floats(0, 100))
def test_drift_means_every_fitting_offset_is_beyond_the_bound(
    low: float, width: float, bound: float
) -> None:
    offset = ClockOffset(low, low + width)
    found = drift(offset, bound)
    if found is Drift.WITNESS_AHEAD:
        assert offset.low > bound
    elif found is Drift.WITNESS_BEHIND:
        assert offset.high < -bound
    else:
        assert found is Drift.NONE
        assert offset.low <= bound and offset.high >= -bound


# -- the auditor's side: gnau audit verify with pinned witnesses ------------------------------

#: MemoryLog's entry time, 2026-11-29T12:00:00Z, in POSIX seconds.
STAMPED = int(datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC).timestamp())


def cosigned_bundle(witness: WitnessSigner, cosigned_at: int) -> list[bytes]:
    """An honest log whose last checkpoint ``witness`` cosigned at ``cosigned_at``."""
    log = honest_log(rounds=1)
    note = SignedNote.parse(log.notes[-1])
    line = cosign(witness, note.text, cosigned_at)
    log.notes[-1] = str(with_cosignatures(note, [line]))
    return [line.encode() for line in log.bundle_lines()]


@pytest.mark.parametrize(
    ("cosigned_at", "lead", "warned"),
    [
        (STAMPED + 2, -3.0, False),  # the witness signed after the entries, as it must
        (STAMPED - 5, 4.0, False),  # 4 s past: within the 5 s bound
        (STAMPED - 60, 59.0, True),  # the entries a minute past the cosignature
    ],
)
def test_a_bundle_reports_how_far_its_entries_are_stamped_past_the_cosignatures(
    cosigned_at: int, lead: float, warned: bool
) -> None:
    witness = WitnessSigner.generate("witness.test/w1")
    lines = cosigned_bundle(witness, cosigned_at)
    report = verify_bundle(lines, witnesses=[witness.key], quorum=1)
    assert report.ok, report.summary()
    assert report.entry_lead_seconds == lead
    clock_warnings = [warning for warning in report.warnings if "stamped" in warning]
    if warned:
        assert clock_warnings == [
            f"entry {report.size - 1:,} is stamped 59.0 s after witness 'witness.test/w1' "
            f"cosigned the checkpoint of size {report.size:,} (more than 5 s): the dealer's "
            "clock ran ahead, or the witness's behind, so entry times near it may be off"
        ]
        assert f"warning: {clock_warnings[0]}" in report.summary()
    else:
        assert clock_warnings == []
    # Without the witness pinned, its cosignature tells nothing.
    assert verify_bundle(lines).entry_lead_seconds is None
