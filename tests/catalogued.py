"""Tables for tests: a round is dealt only at a table of its operator's catalogue (issue 38), so a
test that plays catalogues the tables it plays at, with the rule sets and limits it needs.

A first start catalogues the starter tables (``table-1`` to ``table-8`` of the default operator,
the default house rules, stakes up to 1,000,000, 6 seats); :func:`catalogued` adds a table or
replaces its configuration, so a test may widen those too. The running services of the
``service``, ``metered`` and web fixtures catalogue the tables their test module declares
(:func:`catalogue_module_tables`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from gnau_service.audit.actors import CONSOLE
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.rounds.catalogue import Catalogue, CatalogueError, TableConfig
from gnau_service.rounds.limits import LARGEST_MAX_STAKE, MOST_SEATS
from gnau_service.rules.currency import Currency
from gnau_service.rules.house_rules import HouseRules
from gnau_service.store import Store

#: What a test's table deals under unless it says otherwise: any stake and seat count the
#: service allows, so that the test meets only the limits it is about.
WIDE_OPEN = TableConfig(
    Currency.of("EUR"),
    (HouseRules(),),
    min_stake=1,
    max_stake=LARGEST_MAX_STAKE,
    max_seats=MOST_SEATS,
)


def table_config(*rule_sets: HouseRules, **limits: Any) -> TableConfig:
    """:data:`WIDE_OPEN` approving ``rule_sets`` (the default house rules if none), with
    ``limits`` changed."""
    return replace(WIDE_OPEN, rule_sets=rule_sets or WIDE_OPEN.rule_sets, **limits)


async def catalogue(
    store: Store,
    tables: Iterable[str],
    *rule_sets: HouseRules,
    operator: str = DEFAULT_OPERATOR,
    config: TableConfig | None = None,
) -> None:
    """Catalogue ``operator``'s ``tables`` under ``config`` (or :func:`table_config` of
    ``rule_sets``), replacing the configuration of any already there."""
    wanted = config or table_config(*rule_sets)
    shelf = Catalogue(store)
    for table_id in tables:
        try:
            await shelf.add_table(operator, table_id, wanted, actor=CONSOLE)
        except CatalogueError:
            await shelf.change_table(operator, table_id, lambda _: wanted, actor=CONSOLE)


def catalogued(
    store: Store,
    tables: Iterable[str],
    *rule_sets: HouseRules,
    operator: str = DEFAULT_OPERATOR,
    config: TableConfig | None = None,
) -> None:
    """:func:`catalogue`, for a test outside an event loop."""
    asyncio.run(catalogue(store, tables, *rule_sets, operator=operator, config=config))


async def catalogue_module_tables(store: Store, module: object) -> None:
    """Catalogue the tables a test module declares for the running services of its fixtures:
    its ``CATALOGUED`` table ids (the default operator's), approving its ``APPROVED_RULES``
    (the default house rules if it declares none). A module that declares none gets none."""
    tables = getattr(module, "CATALOGUED", ())
    if tables:
        await catalogue(store, tables, *getattr(module, "APPROVED_RULES", ()))
