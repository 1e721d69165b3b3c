"""The audit log read over gRPC: what ``gnau audit`` reads from a database, for auditors who have
a token but no database.

:class:`RemoteLog` answers the reads the audit commands make of a
:class:`~gnau_service.store.LogReader`, under the same names and with the same meaning, so that
each command has one code path whatever it reads from; and :meth:`RemoteLog.bundle_source` is a
:class:`~gnau_service.audit.bundle.LogSource`, so that a bundle exported over gRPC is written by
the one :func:`~gnau_service.audit.bundle.write_bundle`, byte for byte the database's.

Nothing here trusts the server: it copies what the server says, and ``gnau audit verify`` (or the
decoding of every entry shown) checks it. It refuses only answers it cannot use (a note that is
not a checkpoint, sizes out of order, a stream that ends early) with :class:`RemoteLogError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import grpc
from gnau_client import GnauClient

from gnau_service.audit.checkpoint import Checkpoint, CheckpointError
from gnau_service.audit.merkle import Frontier, leaf_hash
from gnau_service.audit.note import NoteError, SignedNote
from gnau_service.common.strict_json import JsonTextError, read_json

#: Entries read per call while looking back from the end of the log for the latest rounds.
TAIL_PAGE: Final = 100


class RemoteLogError(ValueError):
    """The server answered something a reader of the log cannot use; the message says what."""


def checkpoint_size(note: str) -> int:
    """The tree size a signed checkpoint note states (its signature is not checked here)."""
    try:
        return Checkpoint.parse(SignedNote.parse(note).text).size
    except (NoteError, CheckpointError) as error:
        raise RemoteLogError(f"the server sent a checkpoint that does not parse: {error}") from None


class RemoteLog:
    """The log of the service ``client`` calls. Reading entries needs the auditor role; the
    checkpoints, proofs and keys are public."""

    def __init__(self, client: GnauClient) -> None:
        self._client = client
        #: The client, for the calls that are not reads of the log (``gnau audit players``).
        self.client = client
        self._keys: list[str] | None = None

    # -- what the audit commands read (LogReader's methods of the same names) -------------------

    def checkpoint(self) -> str | None:
        """The latest signed checkpoint, or None if the log has none yet."""
        return self._client.get_checkpoint() or None

    def size(self) -> int:
        """The size of the latest signed checkpoint: the store writes its head and a checkpoint
        in one transaction, so this is the database's ``size()``."""
        note = self.checkpoint()
        return 0 if note is None else checkpoint_size(note)

    def checkpoint_size_from(self, size: int) -> int | None:
        """The smallest checkpointed size of at least ``size``."""
        return next((found for found, _ in self.checkpoints_in(size, None)), None)

    def public_keys(self) -> list[str]:
        """Every key that has signed for the log, oldest first (the store's order)."""
        if self._keys is None:
            self._keys = list(self._client.get_public_keys().verifier_keys)
        return self._keys

    def round_span(self, round_id: str) -> tuple[int, int] | None:
        """The indices of a round's first and last entries, or None if it has none."""
        indices = self._round_indices(round_id)
        return (min(indices), max(indices)) if indices else None

    def round_entries(self, round_id: str) -> list[bytes]:
        """Every entry of one round, in log order."""
        indices = sorted(self._round_indices(round_id))
        if not indices:
            # Only asked of a round the log names: the service's rounds and log disagree.
            raise RemoteLogError(f"the service has no round {round_id!r}, which its log names")
        entries: list[bytes] = []
        # A round's entries are interleaved with other tables'; read each run of them in a call.
        for start, end in _runs(indices):
            entries += self.iter_entries(start, end)
        return entries

    def recent_rounds(self, limit: int) -> list[str]:
        """The ids of the ``limit`` rounds with the latest entries, latest first: read back from
        the end of the log, as the database orders rounds by their last entry (ListRounds orders
        them by when they opened, which differs while rounds of several tables overlap)."""
        found: list[str] = []
        end = self.size()
        while end > 0 and len(found) < limit:
            start = max(0, end - TAIL_PAGE)
            for data in reversed(list(self.iter_entries(start, end))):
                round_id = _round_id(data)
                if round_id is not None and round_id not in found:
                    found.append(round_id)
                    if len(found) == limit:
                        break
            end = start
        return found

    # -- what a bundle needs ------------------------------------------------------------------

    def iter_entries(self, start: int, end: int) -> Iterator[bytes]:
        """The bytes of entries ``start`` to ``end - 1``, over as many calls as the server's
        per-call limit needs; the client checks that each call's indices follow on."""
        while start < end:
            before = start
            for entry in self._client.get_entries(start, end):
                yield entry.data
                start += 1
            if start == before:
                raise RemoteLogError(f"the server sent no entries from index {start}")

    def checkpoints_in(self, first_size: int, last_size: int | None) -> Iterator[tuple[int, str]]:
        """``(size, note)`` of every signed checkpoint with a size in ``first_size..last_size``
        (no upper bound if None), in increasing size, over as many calls as the server needs."""
        while True:
            received = 0
            for note in self._client.get_checkpoints(first_size, last_size or 0):
                size = checkpoint_size(note)
                if size < first_size or (last_size is not None and size > last_size):
                    raise RemoteLogError(
                        f"the server sent a checkpoint of size {size:,} out of the range asked "
                        f"for, or out of order (from {first_size:,})"
                    )
                yield size, note
                received += 1
                first_size = size + 1
            # A call ends early at its limit: call again, until one sends nothing or the range
            # is read (a range with last_size below first_size would be refused).
            if received == 0 or (last_size is not None and first_size > last_size):
                return

    def frontier(self, size: int) -> Frontier:
        """The Merkle frontier of the first ``size`` entries, from public proofs and one entry.

        The inclusion proof of the last leaf, ``size - 1``, in the tree of ``size`` leaves has
        no right siblings: it is the roots of the complete subtrees left of that leaf, smallest
        first (RFC 9162 section 2.1.3.1), which is the frontier of ``size - 1`` leaves read
        backwards. Appending the leaf gives the frontier of ``size``.
        """
        if size == 0:
            return Frontier()
        proof = self._client.get_inclusion_proof(size - 1, size)
        (last,) = self.iter_entries(size - 1, size)
        try:
            before = Frontier(size - 1, tuple(reversed(proof)))
        except ValueError as error:
            raise RemoteLogError(f"the server's inclusion proof cannot be used: {error}") from None
        return before.append(leaf_hash(last))[0]

    def bundle_source(self, first_index: int, end: int) -> RemoteBundleSource:
        """What :func:`~gnau_service.audit.bundle.write_bundle` reads to write entries
        ``first_index`` to ``end - 1``: only the checkpoints in that range are fetched."""
        return RemoteBundleSource(self, first_index, end)

    def _round_indices(self, round_id: str) -> list[int]:
        try:
            return list(self._client.get_round(round_id).log_indices)
        except grpc.RpcError as error:
            # A round the service does not know, or an id no round can have, is not in the log:
            # the database's answer to both.
            if isinstance(error, grpc.Call) and error.code() in (
                grpc.StatusCode.NOT_FOUND,
                grpc.StatusCode.INVALID_ARGUMENT,
            ):
                return []
            raise


@dataclass(frozen=True)
class RemoteBundleSource:
    """A :class:`~gnau_service.audit.bundle.LogSource` over gRPC for one bundle's range."""

    log: RemoteLog
    first_index: int
    end: int

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        return self.log.iter_entries(start, self.end if end is None else end)

    def checkpoints(self) -> list[str]:
        # The bundle holds those of sizes first_index + 1 to end; write_bundle picks the same.
        return [note for _, note in self.log.checkpoints_in(self.first_index + 1, self.end)]

    def public_keys(self) -> list[str]:
        return self.log.public_keys()

    def frontier(self, size: int) -> Frontier:
        return self.log.frontier(size)


def _runs(indices: list[int]) -> Iterator[tuple[int, int]]:
    """``[start, end)`` of each run of consecutive indices, in order.

    >>> list(_runs([3, 4, 5, 9, 11, 12]))
    [(3, 6), (9, 10), (11, 13)]
    """
    start = previous = None
    for index in indices:
        if previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None and previous is not None:
            yield start, previous + 1
        start = previous = index
    if start is not None and previous is not None:
        yield start, previous + 1


def _round_id(data: bytes) -> str | None:
    """The round an entry names, read without verifying it, as the database's ``round_id``
    column is: the rounds found are then read in full and every entry of them verified."""
    try:
        value = read_json(data)
    except JsonTextError:
        return None
    value = value.get("round_id") if isinstance(value, dict) else None
    return value if isinstance(value, str) else None
