"""The ``operator`` label of the per-operator metrics (issue 38): bounded, so that a scrape stays
small and Prometheus' series stay few however many operators a service deals for.

A call's operator is its credential's (the token file's or the mTLS mapping's), so only
operators the service was configured with can reach a label. At most :data:`MAX_OPERATOR_SERIES`
of them have a series of their own: the operators the credentials name, the first that many in
sorted order, when the credentials are known; else the first that many this process counts.
Every other value counts under :data:`OTHER_OPERATORS`: an operator beyond the bound, one the
credentials do not name, and a call without an operator (an auditor of every operator, the
public).

>>> labels = OperatorLabels(limit=2)
>>> [labels.label(operator) for operator in ("casino-b", "casino-a", "casino-c", "casino-b", None)]
['casino-b', 'casino-a', '_other', 'casino-b', '_other']
>>> from gnau_service.server.grpc.auth import Caller, Role
>>> credentials = Credentials(
...     {f"hash-{name}": Caller(Role.OPERATOR, "", name) for name in ("casino-c", "casino-b")},
...     {"CN=casino-a": Caller(Role.AUDITOR, "", "casino-a")},
... )
>>> labels = OperatorLabels(lambda: credentials, limit=2)
>>> [labels.label(operator) for operator in ("casino-c", "casino-a", "casino-b", "casino-z")]
['_other', 'casino-a', 'casino-b', '_other']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from gnau_service.audit.operators import check_operator
from gnau_service.server.grpc.auth import Credentials

#: At most this many operators have series of their own on each per-operator metric.
MAX_OPERATOR_SERIES: Final = 100
#: The label value of every operator beyond the bound or not configured, and of calls without one.
OTHER_OPERATORS: Final = "_other"  # no operator id starts with "_", so none shares it


class OperatorLabels:
    """The label each caller's operator counts under. ``credentials`` gives the service's
    credentials in force (asked at each label, so that a reloaded token file counts); without
    it, the first ``limit`` operators seen have their own series."""

    def __init__(
        self,
        credentials: Callable[[], Credentials] | None = None,
        *,
        limit: int = MAX_OPERATOR_SERIES,
    ) -> None:
        self._credentials = credentials
        self._limit = limit
        self._named: set[str] = set()
        self._named_from: Credentials | None = None

    def label(self, operator: str | None) -> str:
        if operator is None:
            return OTHER_OPERATORS
        if self._credentials is not None:
            self._follow(self._credentials())
            return operator if operator in self._named else OTHER_OPERATORS
        if operator in self._named:
            return operator
        if len(self._named) < self._limit and check_operator(operator) is None:
            self._named.add(operator)
            return operator
        return OTHER_OPERATORS

    def _follow(self, credentials: Credentials) -> None:
        """Name the first operators of ``credentials`` in sorted order, once per credentials (a
        reload of the token file or mapping makes new ones)."""
        if credentials is self._named_from:
            return
        self._named_from = credentials
        callers = [*credentials.tokens.values(), *credentials.common_names.values()]
        configured = {caller.operator for caller in callers if caller.operator is not None}
        valid = sorted(operator for operator in configured if check_operator(operator) is None)
        self._named = set(valid[: self._limit])
