"""Python's cyclic garbage collector, set for a long-running server once it has started.

CPython collects its youngest generation every 700 net allocations of container objects, and
the oldest whenever the objects that survived into it grew by a quarter; a full collection walks
every tracked object, the start-up's included: modules, protobuf descriptors, grpc's and the
store's objects, none of which will ever be garbage. Under load that is CPU taken from every
round, and each full collection stalls every call in flight (a p99 spike);
``bench/bench_service.py`` measures it. Two settings cut most of it:

- :func:`gc.freeze` once started moves every object the start-up made into a permanent
  generation that no collection walks (what Instagram's servers do, and why CPython has it);
- the youngest generation is collected every :data:`YOUNGEST_THRESHOLD` allocations instead of
  700: a call allocates a few hundred containers (messages, views, log events), so the default
  collects several times a round, each time tracing whatever is alive then.

Neither changes what the service does or writes: reference counting still frees almost every
object at once; only cycles wait a little longer, and each collection finds them all.
"""

from __future__ import annotations

import gc
from typing import Final

#: Allocations between collections of the youngest generation (CPython's default is 700).
YOUNGEST_THRESHOLD: Final = 7_000


def settle_after_start() -> None:
    """Collect the start-up's garbage, freeze what is left, and raise the youngest threshold.
    For a serving process, once it has started (not for tests, which start many services)."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNGEST_THRESHOLD, middle, oldest)
