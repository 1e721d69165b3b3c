"""The return to player of each rule set, computed off the event loop and kept.

A rule set's figures come from its exact PAR sheet, which takes seconds of CPU the first time.
So they are computed in a worker thread, one rule set at a time, and kept for good (the house
rules have 768 settings in all, so the cache is bounded by the rules themselves). Callers asking
for a rule set being computed wait for that one computation. At most
:data:`MAX_PENDING_RULE_SETS` rule sets are computed or wait to be at once; a read beyond that
is refused (:class:`TooManyRuleSets`), so that no client can queue unbounded work by asking for
many distinct rule sets, while a Shuffle (``refuse=False``) waits its turn instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.server.errors import TooManyRuleSets
from gnau_service.server.limits import MAX_PENDING_RULE_SETS


@dataclass
class Disclosures:
    """The figures of every rule set asked for so far, and the computations under way."""

    compute: Callable[[HouseRules], ReturnToPlayer] = ReturnToPlayer.of_rules
    max_pending: int = MAX_PENDING_RULE_SETS
    _known: dict[HouseRules, ReturnToPlayer] = field(default_factory=dict, repr=False)
    _pending: dict[HouseRules, asyncio.Task[ReturnToPlayer]] = field(
        default_factory=dict, repr=False
    )
    _turn: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    async def figures(self, rules: HouseRules, *, refuse: bool = True) -> ReturnToPlayer:
        """The figures of ``rules``: at once if known, else after computing them.

        With ``refuse``, raise :class:`TooManyRuleSets` rather than queue a new rule set while
        ``max_pending`` are already computed or waiting.
        """
        known = self._known.get(rules)
        if known is not None:
            return known
        if refuse and rules not in self._pending and len(self._pending) >= self.max_pending:
            raise TooManyRuleSets(self.max_pending)
        # A caller that gives up (cancelled, deadline) leaves the computation to the others.
        return await asyncio.shield(self._computation(rules))

    def warm(self, rules: HouseRules) -> None:
        """Start computing the figures of ``rules`` without waiting for them: the service's
        usual rules, at start-up, so that its first Shuffle does not wait for seconds."""
        if rules not in self._known:
            self._computation(rules)

    def _computation(self, rules: HouseRules) -> asyncio.Task[ReturnToPlayer]:
        task = self._pending.get(rules)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._compute(rules))
            self._pending[rules] = task
        return task

    async def _compute(self, rules: HouseRules) -> ReturnToPlayer:
        try:
            async with self._turn:
                figures = await asyncio.to_thread(self.compute, rules)
            self._known[rules] = figures
            return figures
        finally:
            del self._pending[rules]
