"""The log head's notice: what it carries round-trips, and what does not fit is left out (the
receiver then asks the database)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gnau_service.store.head_notices import PAYLOAD_LIMIT, HeadNotice


@given(
    st.integers(min_value=0, max_value=2**40),
    st.lists(st.integers(min_value=1, max_value=2**62), unique=True, max_size=300),
)
def test_a_batch_s_indices_round_trip_when_they_fit(first: int, pending_ids: list[int]) -> None:
    # A batch: ids in increasing order get consecutive indices from the old size on.
    indices = {pending_id: first + i for i, pending_id in enumerate(sorted(pending_ids))}
    notice = HeadNotice(first + len(indices), indices)
    payload = notice.encode()
    decoded = HeadNotice.decode(payload)
    assert decoded is not None and decoded.size == notice.size
    if len(payload) <= PAYLOAD_LIMIT and decoded.indices is not None:
        assert dict(decoded.indices) == indices
    else:
        assert decoded.indices is None and payload == str(notice.size)


def test_too_many_ids_for_a_notice_leave_the_size_alone() -> None:
    indices = {10**12 * (i + 1): i for i in range(2000)}  # 2000 differences of 13 digits
    assert HeadNotice(2000, indices).encode() == "2000"
    assert HeadNotice.decode("2000") == HeadNotice(2000, None)


def test_indices_with_a_gap_are_not_carried() -> None:
    # Not one batch's (its indices are consecutive): rather ask the database than guess.
    assert HeadNotice(9, {1: 5, 2: 7}).encode() == "9"


def test_a_notice_that_is_not_one_is_ignored() -> None:
    assert [HeadNotice.decode(text) for text in ("", "x", "-1", "3 a", "3  4", "3 4 ")] == [
        None
    ] * 6
    assert HeadNotice.decode("3 1 10 -2") == HeadNotice(3, {10: 1, 8: 2})
