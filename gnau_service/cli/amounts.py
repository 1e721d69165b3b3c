"""Amounts of money as the command line prints them: a gain with ``+``, a loss with ``-``, and
nothing moved as a bare ``0`` (never ``+0``), with thousands separated.

>>> signed_amount(1_500), signed_amount(-20), signed_amount(0)
('+1,500', '-20', '0')
"""

from __future__ import annotations


def signed_amount(value: int) -> str:
    """``value`` minor units with its sign; zero, which is neither a gain nor a loss, has none."""
    return f"{value:+,}" if value else "0"
