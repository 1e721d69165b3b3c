"""Which operator (casino brand) a round, a player or a credential belongs to (issue 38).

One service deals for many operators. Each operator token and client certificate belongs to
exactly one operator; an auditor's to one operator or to all of them (a regulator). Tables,
rounds, players and request ids are scoped by operator: one operator never reads, changes, voids,
lists or forgets another's.

An operator id is a label chosen by whoever runs the service, never personal data: 1 to 64
characters of lowercase letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit.
Every round entry of the log names its operator in the ``operator`` member of its payload, as
``PLAYER_FORGOTTEN`` does; entries written before operators existed have no such member, and
their rounds belong to :data:`DEFAULT_OPERATOR`.

>>> check_operator("casino-a") is None, check_operator(DEFAULT_OPERATOR) is None
(True, True)
>>> check_operator("Casino-A")
"operator 'Casino-A' is not 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
"""

from __future__ import annotations

import re
from typing import Final

from gnau_service.common.quoting import quoted

#: The payload member that names a round's (or a forgotten player's) operator.
OPERATOR_FIELD: Final = "operator"
#: The operator of every round, player and credential from before operators existed, and of a
#: first start's local operator token.
DEFAULT_OPERATOR: Final = "default"
#: What a token file or mTLS mapping says for an auditor of every operator (a regulator).
ALL_OPERATORS: Final = "*"
OPERATOR_PATTERN: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def check_operator(value: object) -> str | None:
    """Why ``value`` is not an operator id, or None when it is one.

    >>> check_operator("")
    "operator '' is not 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
    >>> check_operator(7)
    'operator 7 is not a string'
    """
    if not isinstance(value, str):
        return f"operator {quoted(value)} is not a string"
    if OPERATOR_PATTERN.fullmatch(value) is None:
        return (
            f"operator {quoted(value)} is not 1 to 64 of a-z, 0-9, '.', '_', '-', starting with"
            " a letter or digit"
        )
    return None


def operator_id(value: str) -> str:
    """``value`` if it is an operator id, else :class:`ValueError` saying why.

    >>> operator_id("casino-b")
    'casino-b'
    """
    problem = check_operator(value)
    if problem is not None:
        raise ValueError(problem)
    return value
