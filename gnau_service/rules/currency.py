"""A stake's currency: an ISO 4217 code and its minor-unit exponent (issue 38).

Every amount the service handles is an integer of minor units (cents for EUR, yen for JPY,
fils for BHD); the currency says which, and the exponent how many minor units make a major one
(10 ** exponent). The codes and exponents are ISO 4217's, as the ``iso4217`` package ships them.
``XXX``, ISO 4217's code for "no currency", has no exponent there; here it is 0: it is the
currency of tables from before the catalogue, whose stakes named none.

>>> Currency.of("EUR"), Currency.of("JPY").exponent, Currency.of("BHD").exponent
(Currency(code='EUR', exponent=2), 0, 3)
>>> Currency.of("eur")
Traceback (most recent call last):
...
ValueError: currency 'eur' is not an ISO 4217 code
>>> Currency.from_json({"code": "EUR", "exponent": 2}) == Currency.of("EUR")
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import iso4217

from gnau_service.common.quoting import quoted

#: What a log reader takes as a currency code: three capital letters (it need not know the list).
CODE_PATTERN: Final = re.compile(r"[A-Z]{3}")
#: The largest minor-unit exponent ISO 4217 uses (4: CLF, UYW).
MAX_EXPONENT: Final = 4


@dataclass(frozen=True)
class Currency:
    """An ISO 4217 currency: its code and its minor-unit exponent."""

    code: str
    exponent: int

    @classmethod
    def of(cls, code: str) -> Currency:
        """The currency with this ISO 4217 code; :class:`ValueError` if there is none."""
        if CODE_PATTERN.fullmatch(code) is None:
            raise ValueError(f"currency {quoted(code)} is not an ISO 4217 code")
        try:
            exponent = iso4217.Currency(code).exponent
        except ValueError:
            raise ValueError(f"currency {quoted(code)} is not an ISO 4217 code") from None
        return cls(code, exponent or 0)

    def to_json(self) -> dict[str, str | int]:
        return {"code": self.code, "exponent": self.exponent}

    @classmethod
    def from_json(cls, value: object) -> Currency:
        """A currency as the log holds it, checked for its form only (a reader of an old log
        need not know a code retired since): :class:`ValueError` if it is not one.

        >>> Currency.from_json({"code": "EUR", "exponent": 9})
        Traceback (most recent call last):
        ...
        ValueError: currency must be {"code": three capital letters, "exponent": 0 to 4}
        """
        if isinstance(value, dict) and set(value) == {"code", "exponent"}:
            code, exponent = value["code"], value["exponent"]
            if (
                isinstance(code, str)
                and CODE_PATTERN.fullmatch(code)
                and type(exponent) is int
                and 0 <= exponent <= MAX_EXPONENT
            ):
                return cls(code, exponent)
        raise ValueError(
            f'currency must be {{"code": three capital letters, "exponent": 0 to {MAX_EXPONENT}}}'
        )


#: The currency of tables catalogued from the rounds of before the catalogue.
NO_CURRENCY: Final = Currency("XXX", 0)
