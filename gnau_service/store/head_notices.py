"""The log head's notice: what a sequencer batch tells every process once it commits (on
PostgreSQL, the payload of ``NOTIFY gnau_log_head``).

It carries the log's new size (what the log tail needs) and, when it fits in a notice, the log
index of each pending event the batch integrated, so that a process whose callers wait for those
events answers them without asking the database. A batch gives its events consecutive indices
from the old size on, in the order of their pending ids (see
:mod:`~gnau_service.store.sequencer`), so the notice needs only the first index and the ids.
The ids themselves are not consecutive (a sequence has gaps, and a step may commit after a later
id's), so they are written as differences from the one before, which keeps them short.

The text is ``SIZE`` alone (the indices are not carried: ask the database), or ``SIZE FIRST`` then
the ids' differences, space-separated, shorter than PostgreSQL's limit of 8000 bytes:

>>> notice = HeadNotice(12, {40: 9, 41: 10, 45: 11})
>>> notice.encode()
'12 9 40 1 4'
>>> HeadNotice.decode("12 9 40 1 4") == notice
True
>>> HeadNotice.decode("12")
HeadNotice(size=12, indices=None)
>>> HeadNotice.decode("12 x") is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

#: The longest notice payload (PostgreSQL requires fewer than 8000 bytes).
PAYLOAD_LIMIT: Final = 7999


@dataclass(frozen=True)
class HeadNotice:
    """The log's new size, and each integrated pending id's index (None: not carried)."""

    size: int
    indices: Mapping[int, int] | None = None

    def encode(self) -> str:
        """The payload: the indices too if they are consecutive and fit, else the size alone."""
        if self.indices is None:
            return f"{self.size:d}"
        by_index = sorted(self.indices.items(), key=lambda item: item[1])
        first = by_index[0][1] if by_index else self.size
        if any(index != first + i for i, (_, index) in enumerate(by_index)):
            return f"{self.size:d}"
        words = [f"{self.size:d}", f"{first:d}"]
        previous = 0
        for pending_id, _ in by_index:
            words.append(f"{pending_id - previous:d}")
            previous = pending_id
        text = " ".join(words)
        return text if len(text) <= PAYLOAD_LIMIT else f"{self.size:d}"

    @classmethod
    def decode(cls, payload: str) -> HeadNotice | None:
        """The notice in ``payload``; None if it is not one (nothing to act on)."""
        words = payload.split(" ")
        if not all(word.lstrip("-").isdigit() for word in words) or words[0].startswith("-"):
            return None
        size = int(words[0])
        if len(words) == 1:
            return cls(size)
        first = int(words[1])
        indices: dict[int, int] = {}
        pending_id = 0
        for offset, word in enumerate(words[2:]):
            pending_id += int(word)
            indices[pending_id] = first + offset
        return cls(size, indices)
