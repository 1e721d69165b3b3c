"""A round's receipt, gathered from the store (the format and its checks:
:mod:`gnau_service.audit.receipts`, ``docs/receipts.md``).

A receipt exists once the round's seed is public (revealed, settled or voided). It proves the
round against the latest signed checkpoint that the log's witness quorum has cosigned and that
covers the round (the latest checkpoint if none does yet, or if the log has no witnesses), with
every cosignature the log holds for it; so the same round's receipt fetched later proves it
against a newer one. With ``pinned_size`` it also carries the consistency proof from a
checkpoint the caller pinned earlier.
"""

from __future__ import annotations

from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.note import Verifier
from gnau_service.audit.receipts import Consistency, Receipt, ReceiptEntry
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.record import SEED_IS_PUBLIC
from gnau_service.rounds.refusals import OutOfRange, WrongState
from gnau_service.rounds.view import revealed_round
from gnau_service.store import LogReader
from gnau_service.store.cosignatures import WitnessQuorum, served_checkpoint


def round_receipt(
    dealer: Dealer,
    round_id: str,
    *,
    operator: str | None,
    public: bool,
    pinned_size: int,
    quorum: WitnessQuorum,
) -> Receipt:
    """The receipt of ``round_id`` against the latest checkpoint, if it is ``operator``'s
    round (any operator's if None). To the public a round whose seed is not public does not
    exist (RoundNotFound, as GetRound), nor to anyone a round of another operator; to others it
    has no receipt yet (WrongState). Blocking: call it from a thread."""
    view = dealer.get(round_id, operator=operator, public=public)
    record = view.record
    if record.state not in SEED_IS_PUBLIC:
        raise WrongState(round_id, record.state, "GetRoundReceipt")
    store = dealer.store
    covering = max(record.log_indices) + 1
    served = served_checkpoint(store, quorum, cosigned=True, at_least=covering)
    assert served is not None  # every batch writes one, and the round's own entries made batches
    size, note = served
    if pinned_size < 0 or pinned_size > size:
        raise OutOfRange(
            f"pinned_size {pinned_size:,} is not between 0 and the log's signed size {size:,}"
        )
    entries = store.round_entries(round_id)
    revealed = revealed_round(view)
    return Receipt(
        round_id=round_id,
        round=None if revealed is None else revealed.to_json(),
        entries=tuple(
            ReceiptEntry(index, data, tuple(store.inclusion_proof(index, size)))
            for index, data in zip(record.log_indices, entries, strict=True)
        ),
        checkpoint=note,
        key_rotations=key_rotation_notes(store),
        consistency=Consistency(pinned_size, tuple(store.consistency_proof(pinned_size, size)))
        if 0 < pinned_size < size
        else None,
    )


def key_rotation_notes(reader: LogReader) -> tuple[str, ...]:
    """Every key rotation statement of the log, oldest first, as signed-note text."""
    verifiers = [Verifier.from_vkey(vkey) for vkey in reader.public_keys()]
    return tuple(
        str(decode_entry(data, *verifiers).payload["rotation"])
        for data in reader.entries_of_kind(EntryKind.KEY_ROTATED)
    )
