"""Whether a witness may cosign a checkpoint, given the latest one it cosigned for that log.

This is the tlog-witness rule set once its signature checks (404, 403) have passed; it is pure,
so the store can run it inside the transaction that also records the outcome.

========================  ======  =====================================================
Refusal                   Status  When
========================  ======  =====================================================
``old_size_too_large``    400     ``old`` is larger than the checkpoint's size
``old_size_mismatch``     409     ``old`` is not the size of the latest cosigned
                                  checkpoint (0 if none)
``root_mismatch``         409     the sizes are equal but the roots differ: a fork
``inconsistent``          422     the consistency proof does not connect the latest
                                  cosigned checkpoint to this one (or is not empty when
                                  it must be)
========================  ======  =====================================================

>>> from gnau_service.audit.merkle import EMPTY_ROOT
>>> first = Checkpoint("example.com/log", 0, EMPTY_ROOT)
>>> judge(None, 0, (), first) is None
True
>>> judge(first, 3, (), first).refusal
<Refusal.OLD_SIZE_TOO_LARGE: 'old_size_too_large'>
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.merkle import ProofError, verify_consistency


class Refusal(StrEnum):
    """Why a validly signed checkpoint was not cosigned."""

    OLD_SIZE_TOO_LARGE = "old_size_too_large"
    OLD_SIZE_MISMATCH = "old_size_mismatch"
    ROOT_MISMATCH = "root_mismatch"
    INCONSISTENT = "inconsistent"


#: The HTTP status each refusal answers with, as tlog-witness prescribes.
REFUSAL_STATUS: Final = {
    Refusal.OLD_SIZE_TOO_LARGE: 400,
    Refusal.OLD_SIZE_MISMATCH: 409,
    Refusal.ROOT_MISMATCH: 409,
    Refusal.INCONSISTENT: 422,
}


@dataclass(frozen=True)
class Refused:
    """A refusal, its reason in words, and the latest cosigned size (the 409 body)."""

    refusal: Refusal
    reason: str
    latest_size: int

    @property
    def status(self) -> int:
        return REFUSAL_STATUS[self.refusal]


def judge(
    latest: Checkpoint | None, old_size: int, proof: Sequence[bytes], new: Checkpoint
) -> Refused | None:
    """None if ``new`` may be cosigned after ``latest`` (None: nothing cosigned yet)."""
    recorded = latest.size if latest is not None else 0

    def refused(refusal: Refusal, reason: str) -> Refused:
        return Refused(refusal, reason, recorded)

    if old_size > new.size:
        return refused(
            Refusal.OLD_SIZE_TOO_LARGE, f"old size {old_size} is larger than the size {new.size}"
        )
    if old_size != recorded:
        return refused(
            Refusal.OLD_SIZE_MISMATCH,
            f"old size {old_size} is not the latest cosigned size {recorded}",
        )
    if latest is not None and new.size == latest.size and new.root_hash != latest.root_hash:
        return refused(
            Refusal.ROOT_MISMATCH,
            f"size {new.size} was cosigned with another root hash: the log has forked",
        )
    if old_size in (0, new.size):
        if proof:
            return refused(
                Refusal.INCONSISTENT,
                f"the proof must be empty from size {old_size} to {new.size}, "
                f"got {len(proof)} hashes",
            )
        return None
    assert latest is not None  # old_size == recorded > 0
    try:
        verify_consistency(old_size, new.size, proof, latest.root_hash, new.root_hash)
    except ProofError as error:
        return refused(
            Refusal.INCONSISTENT,
            f"the consistency proof from {old_size} to {new.size} fails: {str(error)[:200]}",
        )
    return None
