"""Strict JSON: the one reader of JSON text from outside (revealed rounds, receipts, the lines of
an audit bundle, log entries), and of the objects a format names the members of.

``json.loads`` alone lets through what is not JSON, or what two readers may read differently: a
member given twice (json keeps the last, another reader may keep the first, and the two would
read different documents from the same bytes), ``NaN``, ``Infinity`` and ``-Infinity``, and bytes
in UTF-16 or after a byte-order mark. :func:`read_json` refuses each, and turns the json module's
own limits (an integer of thousands of digits, nesting deeper than its recursion) into the same
error, :class:`JsonTextError`, whose message says which.

A format with rules of its own for numbers passes its readers of them, as ``json.loads`` takes
them (the log entry allows only integers within ±(2**53-1)); they refuse with
:class:`JsonTextError` too.

:func:`read_object` takes a parsed value as an object of the members a format names, refusing
another value (:class:`NotAnObjectError`) or other members (:class:`MembersError`); each format
words the refusal its own way from what the error holds.

>>> read_json(b'{"seat_number": 1, "stake": 5}')
{'seat_number': 1, 'stake': 5}
>>> read_json('{"stake": 5, "stake": 6}')  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
gnau_service.common.strict_json.DuplicateMemberError: ...: the member 'stake' appears twice
>>> read_json('{"stake": NaN}')
Traceback (most recent call last):
...
gnau_service.common.strict_json.JsonTextError: not JSON: NaN is not a JSON number
>>> read_json(b'{"stake": "\\xff"}')
Traceback (most recent call last):
...
gnau_service.common.strict_json.JsonTextError: not UTF-8: byte 0xff at offset 11
>>> read_object({"stake": 5, "seat": 1}, ("seat_number", "stake"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
gnau_service.common.strict_json.MembersError: missing members ['seat_number'], unknown ...['seat']
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Collection
from typing import NoReturn

from gnau_service.common.quoting import quoted


class JsonTextError(ValueError):
    """Text that is not JSON, or JSON that no reader of outside input accepts; the message says
    which, starting ``not UTF-8``, ``not JSON`` or ``not JSON this reader accepts``."""


class DuplicateMemberError(JsonTextError):
    """An object that names one ``member`` twice."""

    def __init__(self, member: str) -> None:
        super().__init__(f"not JSON this reader accepts: the member {quoted(member)} appears twice")
        self.member = member


class NestingError(JsonTextError):
    """Arrays and objects nested deeper than the parser goes."""


def read_json(
    text: str | bytes,
    *,
    parse_int: Callable[[str], object] | None = None,
    parse_float: Callable[[str], object] | None = None,
) -> object:
    """The value that JSON ``text`` (bytes must be UTF-8) holds; raises :class:`JsonTextError`
    for text that is not JSON, has a member twice in one object, or a number that is not one
    (``NaN``, ``Infinity``), or that the parser cannot take. ``parse_int`` and ``parse_float``
    read numbers as in ``json.loads``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            byte = text[error.start]
            raise JsonTextError(f"not UTF-8: byte {byte:#04x} at offset {error.start}") from None
    try:
        return json.loads(
            text,
            object_pairs_hook=_object,
            parse_constant=_not_a_number,
            parse_int=parse_int,
            parse_float=parse_float,
        )
    except JsonTextError:
        raise
    except json.JSONDecodeError as error:
        raise JsonTextError(
            f"not JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except RecursionError:
        raise NestingError(
            "not JSON this reader accepts: nested too deeply (past the parser's maximum "
            "recursion depth)"
        ) from None
    except ValueError:  # the parser's one other refusal: int() of too many digits
        raise JsonTextError(
            "not JSON this reader accepts: an integer of over "
            f"{sys.get_int_max_str_digits()} digits"
        ) from None


class NotAnObjectError(ValueError):
    """A value that is not the JSON object a format expects; ``found`` is its type, as
    :func:`json_type` names it."""

    def __init__(self, value: object) -> None:
        super().__init__("not a JSON object")
        self.found = json_type(value)


class MembersError(ValueError):
    """An object whose members are not those its format names: ``missing``, in the format's
    order, and ``unknown``, in the object's (the message lists each sorted)."""

    def __init__(self, missing: list[str], unknown: list[str]) -> None:
        super().__init__(
            f"missing members {quoted(sorted(missing), 120)}, unknown members "
            f"{quoted(sorted(unknown), 120)}"
        )
        self.missing = missing
        self.unknown = unknown


def read_object(
    value: object, members: Collection[str], *, optional: Collection[str] = ()
) -> dict[str, object]:
    """``value``, a parsed JSON object of exactly ``members``, of which ``optional`` may be
    absent; raises :class:`NotAnObjectError` for any other value and :class:`MembersError` for
    an object with another member or without one that is not optional.

    >>> read_object({"label": "x"}, ("label", "value"), optional=("value",))
    {'label': 'x'}
    >>> try:
    ...     read_object([], ("label",))
    ... except NotAnObjectError as error:
    ...     error.found
    'an array'
    """
    if not isinstance(value, dict):
        raise NotAnObjectError(value)
    missing = [name for name in members if name not in value and name not in optional]
    unknown = [name for name in value if name not in members]
    if missing or unknown:
        raise MembersError(missing, unknown)
    return value


def json_type(value: object) -> str:
    """How JSON names the type of a parsed value, for error messages.

    >>> json_type(None), json_type(True), json_type(5), json_type([]), json_type({})
    ('null', 'a boolean', 'a number', 'an array', 'an object')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for member, _ in pairs:
            if member in seen:
                raise DuplicateMemberError(member)
            seen.add(member)
    return obj


def _not_a_number(name: str) -> NoReturn:
    raise JsonTextError(f"not JSON: {name} is not a JSON number")
