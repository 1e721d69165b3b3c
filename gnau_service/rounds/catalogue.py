"""The table catalogue: which tables each operator deals at, under what, and whether it may deal.

A round is dealt only at a catalogued table (issue 38). A table is an operator's: its id is the
operator's own, as a round's is. Its configuration (:class:`TableConfig`) says the currency of its
stakes (ISO 4217, :mod:`gnau_service.rules.currency`), the rule sets approved for it, the least
and the most a seat may stake, the most seats a round may have, its deal and settle deadlines
(none: the service's, :mod:`~gnau_service.rounds.deadlines`), and whether it is enabled.

Every change is a new version of the table, kept, and a signed ``TABLE_CHANGED`` entry naming
who made it (its ``actor``), in the same step: the catalogue and the log never disagree. A round
is played under the version in force at its shuffle: its ``ROUND_COMMITTED`` entry names that
version (``table_version``) and the currency, and its deal is held to that version's limits, so a
change made while a round is open never reaches it. Disabling a table, its operator
(``OPERATOR_CHANGED``) or all gaming (``GAMING_CHANGED``) stops new rounds only; open rounds still
complete.

An operator may carry an allowed band of return to player (a jurisdiction's minimum, say): no
table of its may approve a rule set whose exact PAR figure
(:class:`~gnau_service.rules.return_to_player.ReturnToPlayer`) falls outside it, and a band that
a table's approved rule sets fall outside is refused.

>>> config = TableConfig(Currency.of("EUR"), (HouseRules(),), min_stake=100, max_stake=50_000)
>>> config.approves(HouseRules()), config.approves(HouseRules(decks=2))
(True, False)
>>> TableConfig.from_json(config.to_json()) == config
True
>>> TableConfig(Currency.of("EUR"), (HouseRules(),), min_stake=0, max_stake=500)
Traceback (most recent call last):
...
gnau_service.rounds.catalogue.CatalogueError: min_stake must be 1 to max_stake (500), not 0
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cache, lru_cache
from typing import Final

from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.operators import DEFAULT_OPERATOR, OPERATOR_FIELD, operator_id
from gnau_service.rounds.deadlines import MAX_DEADLINE_SECONDS, MIN_DEADLINE_SECONDS, Deadlines
from gnau_service.rounds.limits import (
    DEFAULT_MAX_STAKE,
    LARGEST_MAX_STAKE,
    MAX_RULE_SETS_PER_TABLE,
    MAX_TABLES_PER_OPERATOR,
    MOST_SEATS,
)
from gnau_service.rounds.refusals import (
    CatalogueFull,
    RtpOutsideBand,
    RulesNotApproved,
    TableDisabled,
    TableNotFound,
)
from gnau_service.rounds.requests import SeatLimits, check_table_id
from gnau_service.rules.currency import Currency
from gnau_service.rules.house_rules import HouseRules, every_rule_set
from gnau_service.rules.return_to_player import ReturnToPlayer, fraction_text, read_fraction
from gnau_service.store import Store, Transaction
from gnau_service.store.catalogue_rows import (
    CatalogueRow,
    count_tables,
    gaming_enabled,
    has_tables,
    mark_logged,
    operator_config,
    save_gaming,
    save_operator_config,
    save_table_version,
    shuffle_rows,
    table_in_force,
    table_version,
    tables_in_force,
    unlogged_versions,
)
from gnau_service.store.reader import ReadSource

#: The tables a first start catalogues for the default operator (``gnau play --tables 8`` plays
#: at all of them), and what they deal under: euro stakes of 1 cent to 10,000 euro, the default
#: house rules, up to 6 seats, the service's deadlines. Change them with ``gnau table set``.
STARTER_TABLES: Final = tuple(f"table-{n}" for n in range(1, 9))


class CatalogueError(ValueError):
    """A change of the catalogue that is refused; nothing was changed or logged."""


@cache
def _rule_set_order() -> dict[HouseRules, int]:
    return {rules: i for i, rules in enumerate(every_rule_set())}


@dataclass(frozen=True)
class TableConfig:
    """What a table deals under. Amounts are integer minor units of ``currency``."""

    currency: Currency
    #: The approved rule sets, at least one, each once, in :func:`every_rule_set`'s order.
    rule_sets: tuple[HouseRules, ...]
    min_stake: int = 1
    max_stake: int = DEFAULT_MAX_STAKE
    max_seats: int = MOST_SEATS
    #: The table's deadlines; None for the service's (``--deal-deadline``, ``--settle-deadline``).
    deal_seconds: int | None = None
    settle_seconds: int | None = None
    enabled: bool = True

    def __post_init__(self) -> None:
        if not 1 <= len(set(self.rule_sets)) <= MAX_RULE_SETS_PER_TABLE:
            raise CatalogueError(
                f"a table approves 1 to {MAX_RULE_SETS_PER_TABLE} rule sets, not"
                f" {len(set(self.rule_sets))}"
            )
        order = _rule_set_order()
        object.__setattr__(
            self, "rule_sets", tuple(sorted(set(self.rule_sets), key=order.__getitem__))
        )
        if not 1 <= self.max_stake <= LARGEST_MAX_STAKE:
            raise CatalogueError(
                f"max_stake must be 1 to {LARGEST_MAX_STAKE:,}, not {self.max_stake:,}"
            )
        if not 1 <= self.min_stake <= self.max_stake:
            raise CatalogueError(
                f"min_stake must be 1 to max_stake ({self.max_stake:,}), not {self.min_stake:,}"
            )
        if not 1 <= self.max_seats <= MOST_SEATS:
            raise CatalogueError(f"max_seats must be 1 to {MOST_SEATS}, not {self.max_seats}")
        for name in ("deal_seconds", "settle_seconds"):
            value = getattr(self, name)
            if value is not None and not MIN_DEADLINE_SECONDS <= value <= MAX_DEADLINE_SECONDS:
                raise CatalogueError(
                    f"{name} must be {MIN_DEADLINE_SECONDS} to {MAX_DEADLINE_SECONDS}, not {value}"
                )

    def approves(self, rules: HouseRules) -> bool:
        return rules in self.rule_sets

    def seat_limits(self, service_max_stake: int) -> SeatLimits:
        """What a Deal's seats are held to: the table's limits, within the service's."""
        return SeatLimits(min(self.max_stake, service_max_stake), self.min_stake, self.max_seats)

    def deadlines(self, service: Deadlines) -> Deadlines:
        """The table's deadlines, the service's where it sets none."""
        return Deadlines(
            deal_seconds=self.deal_seconds or service.deal_seconds,
            settle_seconds=self.settle_seconds or service.settle_seconds,
        )

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "currency": dict(self.currency.to_json()),
            "rule_sets": [dict(rules.as_dict()) for rules in self.rule_sets],
            "min_stake": self.min_stake,
            "max_stake": self.max_stake,
            "max_seats": self.max_seats,
            "deal_seconds": self.deal_seconds,
            "settle_seconds": self.settle_seconds,
            "enabled": self.enabled,
        }

    @classmethod
    def from_json(cls, value: object) -> TableConfig:
        """A configuration as :meth:`to_json` wrote it (the store's, or a log entry's)."""
        if not isinstance(value, dict):
            raise CatalogueError("a table's configuration must be a JSON object")
        try:
            rule_sets = value["rule_sets"]
            if not isinstance(rule_sets, list):
                raise CatalogueError("rule_sets must be a list")
            return cls(
                currency=Currency.from_json(value["currency"]),
                rule_sets=tuple(HouseRules.from_mapping(rules) for rules in rule_sets),
                min_stake=_integer(value, "min_stake"),
                max_stake=_integer(value, "max_stake"),
                max_seats=_integer(value, "max_seats"),
                deal_seconds=_integer(value, "deal_seconds", optional=True),
                settle_seconds=_integer(value, "settle_seconds", optional=True),
                enabled=_flag(value, "enabled"),
            )
        except KeyError as missing:
            raise CatalogueError(f"a table's configuration has no {missing}") from None
        except ValueError as error:
            raise CatalogueError(str(error)) from None


def _integer(value: dict[str, object], name: str, *, optional: bool = False) -> int:
    number = value[name]
    if optional and number is None:
        return None  # type: ignore[return-value]  # only for the optional fields' None
    if type(number) is not int:
        raise CatalogueError(f"{name} must be an integer")
    return number


def _flag(value: dict[str, object], name: str) -> bool:
    flag = value[name]
    if not isinstance(flag, bool):
        raise CatalogueError(f"{name} must be true or false")
    return flag


STARTER_CONFIG: Final = TableConfig(
    Currency.of("EUR"), (HouseRules(),), min_stake=1, max_stake=1_000_000, max_seats=6
)


@dataclass(frozen=True)
class RtpBand:
    """The return to player an operator's rule sets must have, both ends included."""

    low: Fraction
    high: Fraction

    def __post_init__(self) -> None:
        if not 0 < self.low <= self.high:
            raise CatalogueError(
                f"an RTP band must have 0 < low <= high, not {self.low} to {self.high}"
            )

    def holds(self, rules: HouseRules) -> bool:
        return self.low <= ReturnToPlayer.of_rules(rules).rtp <= self.high

    def to_json(self) -> dict[str, JsonValue]:
        return {"low": fraction_text(self.low), "high": fraction_text(self.high)}

    @classmethod
    def from_json(cls, value: object) -> RtpBand:
        if not isinstance(value, dict):
            raise CatalogueError("an RTP band must be {low, high}")
        return cls(read_fraction(value.get("low"), "low"), read_fraction(value.get("high"), "high"))


@dataclass(frozen=True)
class OperatorConfig:
    """What holds for every table of an operator."""

    enabled: bool = True
    rtp_band: RtpBand | None = None

    def to_json(self) -> dict[str, JsonValue]:
        band = None if self.rtp_band is None else self.rtp_band.to_json()
        return {"enabled": self.enabled, "rtp_band": band}

    @classmethod
    def from_json(cls, value: object) -> OperatorConfig:
        if not isinstance(value, dict):
            raise CatalogueError("an operator's configuration must be a JSON object")
        band = value.get("rtp_band")
        return cls(
            enabled=_flag(value, "enabled"),
            rtp_band=None if band is None else RtpBand.from_json(band),
        )


@dataclass(frozen=True)
class CatalogueEntry:
    """One version of a table."""

    operator: str
    table_id: str
    version: int
    config: TableConfig
    changed_at: str

    @classmethod
    def of_row(cls, row: CatalogueRow) -> CatalogueEntry:
        return cls(row.operator, row.table_id, row.version, _parsed(row.config), row.changed_at)

    def to_json(self) -> dict[str, JsonValue]:
        return {
            OPERATOR_FIELD: self.operator,
            "table_id": self.table_id,
            "version": self.version,
            "config": self.config.to_json(),
            "changed_at": self.changed_at,
        }


@lru_cache(maxsize=1024)
def _parsed(text: str) -> TableConfig:
    """The configuration stored as ``text``: every Shuffle reads its table's, which changes
    rarely, so it is parsed once (keyed by the whole text, it cannot go stale)."""
    return TableConfig.from_json(json.loads(text))


def _text(config: TableConfig | OperatorConfig) -> str:
    return json.dumps(config.to_json(), sort_keys=True, separators=(",", ":"))


def _table_changed(entry: CatalogueEntry, actor: str) -> dict[str, JsonValue]:
    """The ``TABLE_CHANGED`` payload of ``entry``: the version, less the time the entry holds."""
    logged = {key: value for key, value in entry.to_json().items() if key != "changed_at"}
    return {"actor": actor, **logged}


@lru_cache(maxsize=1024)
def _operator_of(text: str) -> OperatorConfig:
    return OperatorConfig.from_json(json.loads(text))


def _operator(tx: Transaction, operator: str) -> OperatorConfig:
    text = operator_config(tx, operator)
    return OperatorConfig() if text is None else _operator_of(text)


def _check_band(band: RtpBand | None, config: TableConfig, table_id: str) -> None:
    if band is None:
        return
    outside = [rules for rules in config.rule_sets if not band.holds(rules)]
    if outside:
        rtp = ReturnToPlayer.of_rules(outside[0]).rtp
        raise RtpOutsideBand(
            f"table {table_id!r} approves {len(outside)} rule set(s) outside its operator's RTP "
            f"band {float(band.low):.4%} to {float(band.high):.4%}: the first returns "
            f"{float(rtp):.4%} ({', '.join(f'{k}={v}' for k, v in outside[0].as_text().items())})",
            table_id,
        )


def shuffle_table(
    tx: Transaction, operator: str, table_id: str, rules: HouseRules
) -> CatalogueEntry:
    """The version of ``operator``'s table a new round with ``rules`` is played under. Refused,
    with nothing changed, if the table is not in the operator's catalogue, if gaming, the
    operator or the table is disabled, or if ``rules`` is not approved for it. The rows read
    stay share-locked until the step commits (:mod:`gnau_service.store.catalogue_rows`)."""
    rows = shuffle_rows(tx, operator, table_id)
    if rows is None:
        raise TableNotFound(table_id)
    if not rows.gaming_enabled:
        raise TableDisabled(table_id, "gaming")
    if not _operator_of(rows.operator_config).enabled:
        raise TableDisabled(table_id, "operator")
    entry = CatalogueEntry.of_row(rows.table)
    if not entry.config.enabled:
        raise TableDisabled(table_id, "table")
    if not entry.config.approves(rules):
        raise RulesNotApproved(table_id, len(entry.config.rule_sets))
    return entry


def played_under(source: ReadSource, operator: str, table_id: str, version: int) -> TableConfig:
    """The configuration a round committed under ``version`` of its table is held to."""
    row = table_version(source, operator, table_id, version)
    if row is None:  # the catalogue keeps every version; a missing one is a damaged store
        raise LookupError(f"table {table_id!r} has no version {version}")
    return CatalogueEntry.of_row(row).config


@dataclass
class Catalogue:
    """Changes and reads of the catalogue, each one step of the store with its log entry."""

    store: Store

    async def add_table(
        self, operator: str, table_id: str, config: TableConfig, *, actor: str
    ) -> CatalogueEntry:
        """Catalogue a new table of ``operator``, as version 1."""
        check_table_id(table_id)
        operator_id(operator)

        def unit(tx: Transaction) -> CatalogueEntry:
            if table_in_force(tx, operator, table_id) is not None:
                raise CatalogueError(
                    f"operator {operator!r} already has a table {table_id!r}: change it with"
                    " `gnau table set`"
                )
            return _add(tx, operator, table_id, config, actor)

        return await self.store.run_async(unit)

    async def put_table(
        self,
        operator: str,
        table_id: str,
        config: TableConfig,
        *,
        actor: str,
        deadline: float | None = None,
    ) -> CatalogueEntry:
        """Add ``operator``'s table, or make ``config`` its next version; the same configuration
        again changes nothing, logs nothing, and returns the version in force."""
        check_table_id(table_id)
        operator_id(operator)

        def unit(tx: Transaction) -> CatalogueEntry:
            row = table_in_force(tx, operator, table_id)
            if row is None:
                return _add(tx, operator, table_id, config, actor)
            return _next_version(tx, CatalogueEntry.of_row(row), config, actor)

        return await self.store.run_async(unit, deadline=deadline)

    async def change_table(
        self,
        operator: str,
        table_id: str,
        change: Callable[[TableConfig], TableConfig],
        *,
        actor: str,
        deadline: float | None = None,
    ) -> CatalogueEntry:
        """Make ``change(config in force)`` the table's next version; unchanged, nothing is
        logged and the version in force is returned. :class:`TableNotFound` if ``operator`` has
        no such table."""
        check_table_id(table_id)

        def unit(tx: Transaction) -> CatalogueEntry:
            row = table_in_force(tx, operator, table_id)
            if row is None:
                raise TableNotFound(table_id)
            current = CatalogueEntry.of_row(row)
            return _next_version(tx, current, change(current.config), actor)

        return await self.store.run_async(unit, deadline=deadline)

    async def set_operator(
        self,
        operator: str,
        change: Callable[[OperatorConfig], OperatorConfig],
        *,
        actor: str,
    ) -> OperatorConfig:
        """Change what holds for all of ``operator``'s tables; logged as ``OPERATOR_CHANGED``."""
        operator_id(operator)

        def unit(tx: Transaction) -> OperatorConfig:
            current = _operator(tx, operator)
            config = change(current)
            if config == current:
                return current
            for row in tables_in_force(tx, operator):
                _check_band(config.rtp_band, CatalogueEntry.of_row(row).config, row.table_id)
            save_operator_config(tx, operator, _text(config))
            tx.append(
                EntryKind.OPERATOR_CHANGED,
                {"actor": actor, OPERATOR_FIELD: operator, "config": config.to_json()},
            )
            return config

        return await self.store.run_async(unit)

    async def set_gaming(self, enabled: bool, *, actor: str) -> bool:
        """Turn all gaming on or off, service-wide; logged as ``GAMING_CHANGED`` if it changed.
        Returns whether it changed."""

        def unit(tx: Transaction) -> bool:
            if gaming_enabled(tx) == enabled:
                return False
            save_gaming(tx, enabled)
            tx.append(EntryKind.GAMING_CHANGED, {"actor": actor, "enabled": enabled})
            return True

        return await self.store.run_async(unit)

    async def tables(
        self, operator: str | None, *, deadline: float | None = None
    ) -> list[CatalogueEntry]:
        """The version in force of each of ``operator``'s tables (None: every operator's)."""
        rows = await self.store.run_async(
            lambda tx: tables_in_force(tx, operator), deadline=deadline
        )
        return [CatalogueEntry.of_row(row) for row in rows]

    async def open_starter_tables(self, *, actor: str) -> tuple[CatalogueEntry, ...]:
        """On a service whose catalogue is empty (its first start), catalogue
        :data:`STARTER_TABLES` of :data:`~gnau_service.audit.operators.DEFAULT_OPERATOR`, so
        that the first walk deals at once; returns them (none if the catalogue had a table)."""

        def unit(tx: Transaction) -> tuple[CatalogueEntry, ...]:
            if has_tables(tx):
                return ()
            return tuple(
                _save(
                    tx,
                    CatalogueEntry(DEFAULT_OPERATOR, table_id, 1, STARTER_CONFIG, tx.time),
                    actor,
                )
                for table_id in STARTER_TABLES
            )

        return await self.store.run_async(unit)

    async def log_migrated(self, *, actor: str) -> int:
        """Give each version that has no ``TABLE_CHANGED`` entry yet (the tables the migration
        catalogued from rounds already played) its entry; returns how many."""

        def unit(tx: Transaction) -> int:
            rows = unlogged_versions(tx)
            for row in rows:
                tx.append(
                    EntryKind.TABLE_CHANGED, _table_changed(CatalogueEntry.of_row(row), actor)
                )
                mark_logged(tx, row)
            return len(rows)

        return await self.store.run_async(unit)


def _add(
    tx: Transaction, operator: str, table_id: str, config: TableConfig, actor: str
) -> CatalogueEntry:
    if count_tables(tx, operator) >= MAX_TABLES_PER_OPERATOR:
        raise CatalogueFull(MAX_TABLES_PER_OPERATOR)
    return _save(tx, CatalogueEntry(operator, table_id, 1, config, tx.time), actor)


def _next_version(
    tx: Transaction, current: CatalogueEntry, config: TableConfig, actor: str
) -> CatalogueEntry:
    """``config`` as the table's next version; the version in force if ``config`` is its own
    (nothing is changed or logged)."""
    if config == current.config:
        return current
    entry = CatalogueEntry(current.operator, current.table_id, current.version + 1, config, tx.time)
    return _save(tx, entry, actor)


def _save(tx: Transaction, entry: CatalogueEntry, actor: str) -> CatalogueEntry:
    _check_band(_operator(tx, entry.operator).rtp_band, entry.config, entry.table_id)
    save_table_version(
        tx,
        CatalogueRow(entry.operator, entry.table_id, entry.version, _text(entry.config), tx.time),
        operator_config=_text(OperatorConfig()),
    )
    tx.append(EntryKind.TABLE_CHANGED, _table_changed(entry, actor))
    return entry


def with_changes(config: TableConfig, **changes: object) -> TableConfig:
    """``config`` with the given fields changed (None values leave a field as it is)."""
    return replace(config, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]


__all__: Sequence[str] = (
    "Catalogue",
    "CatalogueEntry",
    "CatalogueError",
    "OperatorConfig",
    "RtpBand",
    "TableConfig",
    "played_under",
    "shuffle_table",
    "with_changes",
)
