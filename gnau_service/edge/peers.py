"""Who is calling, as the transport says, and warnings about a peer that cannot fill the log.

A peer is its network address without the port: every connection from one host is one peer.
Behind a proxy or a load balancer every client is that proxy's address, so limits per peer
are limits per proxy there (``docs/api.md``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

#: Peers remembered at most by :class:`PeerWarnings`; the longest quiet is forgotten first.
MAX_REMEMBERED_PEERS: Final = 10_000


def peer_address(peer: str) -> str:
    """The address part of a gRPC peer string, without the port.

    >>> peer_address("ipv4:127.0.0.1:51234"), peer_address("ipv6:[::1]:443")
    ('127.0.0.1', '::1')
    >>> peer_address("unix:/run/gnau.sock")
    'unix:/run/gnau.sock'
    """
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    if kind == "ipv6":
        host = rest.rpartition(":")[0] or rest
        return host.removeprefix("[").removesuffix("]")
    return peer[:128]


@dataclass
class _Quiet:
    last_warned: float
    since: int = 0  # occurrences since the last warning


class PeerWarnings:
    """At most one warning per peer per ``interval`` seconds, each with the count it stands for.

    >>> now = [0.0]
    >>> warnings = PeerWarnings(interval=60, clock=lambda: now[0])
    >>> [warnings.due("10.0.0.1") for _ in range(3)]
    [1, None, None]
    >>> now[0] = 61.0
    >>> warnings.due("10.0.0.1"), warnings.total
    (3, 4)
    """

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.total = 0
        self._clock = clock
        self._peers: OrderedDict[str, _Quiet] = OrderedDict()

    def due(self, peer: str) -> int | None:
        """Count one occurrence from ``peer``; the number to report if a warning is due now."""
        self.total += 1
        now = self._clock()
        quiet = self._peers.get(peer)
        if quiet is None or now - quiet.last_warned >= self.interval:
            count = 1 if quiet is None else quiet.since + 1
            self._peers[peer] = _Quiet(now)
            self._peers.move_to_end(peer)
            while len(self._peers) > MAX_REMEMBERED_PEERS:
                self._peers.popitem(last=False)
            return count
        quiet.since += 1
        return None


@dataclass
class _Bucket:
    tokens: float
    at: float


class PeerRates:
    """Events per peer held to ``per_second`` on average, in bursts of ``burst`` (a token bucket
    per peer): :meth:`over` says whether one more goes beyond it.

    >>> now = [0.0]
    >>> rates = PeerRates(per_second=1, burst=2, clock=lambda: now[0])
    >>> [rates.over("10.0.0.1") for _ in range(3)], rates.over("10.0.0.2")
    ([False, False, True], False)
    >>> now[0] = 1.0
    >>> rates.over("10.0.0.1"), rates.over("10.0.0.1")
    (False, True)
    """

    def __init__(
        self, per_second: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_second = per_second
        self.burst = burst
        self._clock = clock
        self._peers: OrderedDict[str, _Bucket] = OrderedDict()

    def over(self, peer: str) -> bool:
        """Count one event from ``peer``; True if it is beyond the peer's rate."""
        now = self._clock()
        bucket = self._peers.get(peer)
        if bucket is None:
            bucket = self._peers[peer] = _Bucket(float(self.burst), now)
            while len(self._peers) > MAX_REMEMBERED_PEERS:
                self._peers.popitem(last=False)
        self._peers.move_to_end(peer)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.per_second)
        bucket.at = now
        if bucket.tokens < 1:
            return True
        bucket.tokens -= 1
        return False
