"""Fair shares of the gRPC port: calls and streams in flight, per caller and in total.

A caller is its credential (``token:NAME``, ``cert:CN``: however many addresses it calls from)
or, for a call without credentials, its address. Each kind of slot is held from the call's
start, before its request is read, to its end:

==============================  ===================================  ==========================
slot                            per caller                           in total
==============================  ===================================  ==========================
a call (unary or a stream)      ``--max-calls-per-caller``           ``--max-concurrent-rpcs``,
                                                                     health checks aside
a stream                        ``--max-streams-per-caller``         ``--max-streams``
==============================  ===================================  ==========================

A call over a share is refused at once with RESOURCE_EXHAUSTED, reason ``TOO_MANY_CALLS`` or
``TOO_MANY_STREAMS``, and a ``QuotaFailure`` naming whose share it was (the caller's, or the
server's); the service logs at most one WARNING per caller per :data:`WARNING_SECONDS`, with the
count of refusals it stands for. So one platform, however many connections and addresses it
uses, holds at most its share, and the others keep theirs. Health checks hold a slot of their
caller's share but none of the total: a full server still answers its probes.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Final

import structlog

from gnau_service.edge.peers import PeerWarnings
from gnau_service.server.grpc.statuses import OverShare, TooManyCalls, TooManyStreams

#: At most one warning per caller over its share in this many seconds.
WARNING_SECONDS: Final = 60.0

log = structlog.get_logger("gnau.rpc")


class Shares:
    """Slots of one kind (``calls`` or ``streams``) held at once, per caller and in total.

    >>> calls = Shares("calls", total=3, per_caller=2)
    >>> with calls.held("token:a"), calls.held("health", counted_in_total=False):
    ...     calls.open
    1
    """

    def __init__(self, kind: str, total: int, per_caller: int) -> None:
        self.kind = kind
        self.total = total
        self.per_caller = per_caller
        self.warnings = PeerWarnings(WARNING_SECONDS)
        self._refusal: type[OverShare] = TooManyStreams if kind == "streams" else TooManyCalls
        self._held: Counter[str] = Counter()
        self._open = 0

    @property
    def open(self) -> int:
        """Slots held now, every caller's."""
        return self._open

    @contextlib.contextmanager
    def held(self, caller: str, *, counted_in_total: bool = True) -> Iterator[None]:
        """Hold one of ``caller``'s slots while the block runs (and one of the total's unless
        not ``counted_in_total``); :class:`OverShare` if either is full."""
        if self._held[caller] >= self.per_caller:
            raise self._refused(caller, caller, self.per_caller)
        if counted_in_total and self._open >= self.total:
            raise self._refused(caller, "the server", self.total)
        self._held[caller] += 1
        self._open += counted_in_total
        try:
            yield
        finally:
            self._open -= counted_in_total
            self._held[caller] -= 1
            if not self._held[caller]:
                del self._held[caller]

    def _refused(self, caller: str, scope: str, limit: int) -> OverShare:
        count = self.warnings.due(caller)
        if count is not None:
            log.warning(
                "over a share",
                caller=caller,
                kind=self.kind,
                scope="caller" if scope == caller else "server",
                limit=limit,
                refusals=count,
                per_seconds=WARNING_SECONDS,
            )
        return self._refusal(scope, limit)
