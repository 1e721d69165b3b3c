"""A bad value, quoted in a message and cut short: every floor's errors quote input through
:func:`quoted`, so that no input, however long, makes a message long."""

from __future__ import annotations

from typing import Final

#: Characters of a quoted value kept before it is cut.
QUOTED_CHARS: Final = 40


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """``repr(value)``, cut after ``limit`` characters with a marker saying how much was left out.

    >>> quoted("KS")
    "'KS'"
    >>> quoted("x" * 1000, limit=8)
    "'xxxxxx…(+995 chars)"
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}…(+{len(text) - limit + 1} chars)"
