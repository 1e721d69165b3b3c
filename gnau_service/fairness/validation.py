"""Bounds checks shared by the fairness dataclasses.

Each check raises the given :class:`FairnessError` subclass with a message that names the
field and, through ``where``, the seat or object it belongs to.

>>> from gnau_service.fairness.errors import LockError
>>> require_int(True, field="stake", minimum=1, maximum=10, error=LockError, where="seat 2: ")
Traceback (most recent call last):
...
gnau_service.fairness.errors.LockError: seat 2: stake must be an integer from 1 to 10, got True
"""

from __future__ import annotations

from gnau_service.common.quoting import quoted
from gnau_service.fairness.errors import FairnessError


def require_int(
    value: object,
    *,
    field: str,
    minimum: int,
    maximum: int,
    error: type[FairnessError],
    where: str = "",
) -> None:
    """An ``int`` (``bool`` is not accepted, though Python counts it as one) within bounds."""
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise error(
            f"{where}{field} must be an integer from {minimum} to {maximum}, got {quoted(value)}",
            field=field,
        )


def require_text(
    value: object,
    *,
    field: str,
    max_bytes: int,
    error: type[FairnessError],
    where: str = "",
) -> None:
    """A non-empty ``str`` whose UTF-8 encoding is at most ``max_bytes`` long.

    Text is hashed as its exact UTF-8 bytes, with no normalization, so a lone surrogate (which
    has no UTF-8 form) is refused here rather than failing later inside a hash.
    """
    if not isinstance(value, str) or not value:
        raise error(f"{where}{field} must be a non-empty string, got {quoted(value)}", field=field)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise error(
            f"{where}{field} must be valid Unicode text, got {quoted(value)}", field=field
        ) from None
    if size > max_bytes:
        raise error(
            f"{where}{field} must be at most {max_bytes} bytes of UTF-8, got {size} bytes",
            field=field,
        )


def require_bytes(
    value: object,
    *,
    field: str,
    min_bytes: int,
    max_bytes: int,
    error: type[FairnessError],
    where: str = "",
) -> None:
    """A ``bytes`` value (immutable, so a frozen dataclass stays frozen) of bounded length."""
    if min_bytes == max_bytes:
        wanted = f"exactly {min_bytes} bytes"
    elif min_bytes == 0:
        wanted = f"at most {max_bytes} bytes"
    else:
        wanted = f"{min_bytes} to {max_bytes} bytes"
    if not isinstance(value, bytes):
        raise error(
            f"{where}{field} must be bytes ({wanted}), got {type(value).__name__}", field=field
        )
    if not min_bytes <= len(value) <= max_bytes:
        raise error(f"{where}{field} must be {wanted}, got {len(value)} bytes", field=field)
