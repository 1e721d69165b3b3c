"""The entries a report counts, read from a bundle or from a store's log, each one checked.

A report (:mod:`gnau_service.audit.report`) trusts only entries that pass these checks, the cheap
half of ``gnau audit verify``'s: each entry's canonical bytes and Ed25519 signature, by the key
current at that point (the pinned key, then each key a ``KEY_ROTATED`` entry rotates to), its
index in sequence, and its ``prev_hash`` the hash of the entry before. Without a pinned key the
source's own first key is trusted, which proves integrity but not authorship (a warning says so).
Not checked here: checkpoints and the Merkle roots they sign, and each round's fairness and
settlement (replay); ``gnau audit verify`` checks them, and docs/reports.md says to run it first.

Decoding runs in worker processes for long logs (:mod:`gnau_service.audit.bundle_workers`, as
the verifier's does).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from gnau_service.audit.bundle import (
    EntryItem,
    Line,
    LineKind,
    entry_items,
    numbered_lines,
    read_header,
    read_line,
)
from gnau_service.audit.bundle_workers import Workers
from gnau_service.audit.entries import GENESIS_PREV_HASH, EntryKind, LogEntry, chain_hash
from gnau_service.audit.note import NoteError, Verifier
from gnau_service.audit.signing import RotationError, trusted_keys
from gnau_service.audit.spans import entry_span

UNPINNED_WARNING = (
    "no key was pinned (--key): the log's own first key is trusted, which proves integrity but "
    "not authorship"
)


class ReportInputError(ValueError):
    """An entry (or a bundle line) that does not decode or verify: nothing is reported."""


@dataclass
class CheckedEntries:
    """Entries ``first_index`` to ``end - 1`` to be checked as they are read."""

    items: Iterable[EntryItem]
    first_index: int
    end: int
    #: The key trusted at ``first_index``, and every key an entry may be signed by.
    trusted: Verifier
    candidates: list[Verifier]
    warnings: list[str] = field(default_factory=list)

    def entries(self, jobs: int | None = None) -> Iterator[LogEntry]:
        """Each entry, decoded and checked; raises :class:`ReportInputError` at the first that
        fails, or at the end if there are fewer or more entries than announced."""
        count = self.end - self.first_index
        rotations: list[str] = []
        current = self.trusted
        expected_prev = GENESIS_PREV_HASH if self.first_index == 0 else None
        index = self.first_index
        with Workers([key.vkey for key in self.candidates], count, jobs) as workers:
            for data, decoded in workers.decoded(self.items):
                if isinstance(decoded, str):
                    raise ReportInputError(f"entry {index:,}: {decoded}")
                assert isinstance(data, bytes)
                if decoded.index != index:
                    raise ReportInputError(
                        f"entry {index:,}: the entry says index {decoded.index:,} (an entry was "
                        "removed, inserted or reordered)"
                    )
                if decoded.key_id != current.key_id.hex():
                    raise ReportInputError(
                        f"entry {index:,}: signed by key {decoded.key_id}, but the trusted key at "
                        f"this point is {current.vkey}"
                    )
                if expected_prev is not None and decoded.prev_hash != expected_prev:
                    raise ReportInputError(
                        f"entry {index:,}: prev_hash is not the previous entry's hash (an entry "
                        "was removed, inserted or reordered)"
                    )
                expected_prev = chain_hash(data)
                if decoded.kind is EntryKind.KEY_ROTATED:
                    current = self._rotated(decoded, rotations)
                yield decoded
                index += 1
        if index != self.end:
            raise ReportInputError(
                f"the source announces {entry_span(self.first_index, self.end)}, but holds "
                f"{entry_span(self.first_index, index)} (truncated or padded)"
            )

    def _rotated(self, entry: LogEntry, rotations: list[str]) -> Verifier:
        note = entry.payload.get("rotation")
        if not isinstance(note, str):
            raise ReportInputError(
                f"entry {entry.index:,}: KEY_ROTATED must carry the signed rotation note"
            )
        try:
            chain = trusted_keys(self.trusted, [*rotations, note])
        except (NoteError, RotationError) as error:
            raise ReportInputError(
                f"entry {entry.index:,}: key rotation refused: {error}"
            ) from None
        rotations.append(note)
        return chain[-1].verifier


def bundle_entries(lines: Iterable[bytes], pinned_keys: Sequence[Verifier] = ()) -> CheckedEntries:
    """A bundle's entries, read line by line as bytes (split at LF only). Raises
    :class:`~gnau_service.audit.bundle.BundleFormatError` if the first line is not a bundle
    header; a later line that holds no entry is refused when :meth:`CheckedEntries.entries`
    reaches it."""
    numbered = numbered_lines(lines)
    header = read_header(next(numbered, None))
    body = (read_line(number, line) for number, line in numbered)
    items = entry_items(_after_checkpoints(body))
    return _checked(items, header.first_index, header.size, list(header.public_keys), pinned_keys)


def _after_checkpoints(lines: Iterable[Line]) -> Iterator[Line]:
    """The lines from the first that is not a checkpoint (checkpoints come first; a report
    does not read them)."""
    reading = False
    for line in lines:
        if reading or line.kind is not LineKind.CHECKPOINT:
            reading = True
            yield line


def log_entries(
    entries: Iterable[bytes], size: int, public_keys: Sequence[str], pinned_keys: Sequence[Verifier]
) -> CheckedEntries:
    """A whole log's entries (from a store: ``iter_entries(0, size)`` and ``public_keys()``)."""
    return _checked(
        entries, 0, size, [Verifier.from_vkey(vkey) for vkey in public_keys], pinned_keys
    )


def _checked(
    items: Iterable[EntryItem],
    first_index: int,
    end: int,
    own_keys: list[Verifier],
    pinned_keys: Sequence[Verifier],
) -> CheckedEntries:
    warnings = [] if pinned_keys else [UNPINNED_WARNING]
    if not pinned_keys and not own_keys:
        raise ReportInputError("the log names no public key, and none was pinned (--key)")
    trusted = pinned_keys[0] if pinned_keys else own_keys[0]
    candidates: list[Verifier] = []
    for key in [*pinned_keys, *own_keys]:
        if key not in candidates:
            candidates.append(key)
    if first_index:
        warnings.append(
            f"the entries start at {first_index:,}: rounds committed before it are counted in "
            "rounds_outside, not in any row"
        )
    return CheckedEntries(items, first_index, end, trusted, candidates, warnings)
