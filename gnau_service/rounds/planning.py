"""Steps planned ahead of the writers' turn, and applied in it if their round has not moved.

Where writers take turns (SQLite: one writer at a time, for every worker process on the file),
whatever a step's unit of work computes inside the turn holds up every other step. So where
other processes wait for the turn (:attr:`Store.writers_contend
<gnau_service.store.store.Store.writers_contend>`), a step of an existing round is computed
first, outside the turn, from a snapshot of its round: the validation of the request, the
shuffle and deal, the settlement, the events' canonical bytes (its *plan*). Then its unit, in
the turn, reads the round again, locked, as it always does, and uses the plan only if the round
is still as the plan read it. The round's *version* is its stored record: every step rewrites it
(with the step's time and the position of its event), so an unchanged record is an unchanged
round. A round another step moved meanwhile is planned again in the turn, from what the unit
read, and counted (:attr:`PlanCounts.recomputed`).

Why this changes nothing that is written: a plan is a pure function of the round's version, of
the request, and of rows that never change once written (a table's version) or that the unit
checks again (each seat's reference, from its player's key). So the unit writes what it would
have written had it planned in the turn. Only where the work runs moves; the order of the log,
its lack of gaps and its crash safety are the sequencer's, as before
(:mod:`~gnau_service.store.sequencer`). A key made ahead for a new player is kept only if the
unit finds the player still without one. A plan that fails (a refused request) is dropped: the
unit meets the same refusal in the turn and answers it, so a refusal is decided where it always
was.

Where no other process waits for the turn (SQLite in one process) nothing is planned ahead:
there the plan's own read of the round, and the unit's check, would only add to the work of the
one process. Nor where writers do not take turns (PostgreSQL: steps of different rounds commit
side by side): the unit plans in its own transaction, which holds only its round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from gnau_service.rounds.record import RoundRecord

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Planned(Generic[P]):
    """A step's plan, the round it was made from (parsed) and that round's version."""

    version: str
    record: RoundRecord
    plan: P


@dataclass
class PlanCounts:
    """How the steps planned ahead went: ``used``, their plan applied as made; ``recomputed``,
    their round moved between the plan and the turn, so planned again in the turn."""

    used: int = 0
    recomputed: int = 0

    def plan_for(self, planned: Planned[P] | None, version: str, replan: Callable[[], P]) -> P:
        """The plan of a step whose round's version, in its turn, is ``version``: the one made
        ahead if it was made from that version, else ``replan()``."""
        if planned is not None:
            if planned.version == version:
                self.used += 1
                return planned.plan
            self.recomputed += 1
        return replan()
