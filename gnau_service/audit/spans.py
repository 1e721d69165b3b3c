"""How a message names a run of log entries: half-open ``[first, end)`` in code, plain words
for people, and never an inclusive range that ends before it starts ("indices 0 to -1").

>>> entry_span(0, 0), entry_span(7, 8), entry_span(0, 1_250)
('no entries', 'entry 7', 'entries 0 to 1,249')
"""

from __future__ import annotations


def entry_span(first: int, end: int) -> str:
    """The entries from index ``first`` up to, not including, ``end``, in words."""
    if end <= first:
        return "no entries"
    if end == first + 1:
        return f"entry {first:,}"
    return f"entries {first:,} to {end - 1:,}"
