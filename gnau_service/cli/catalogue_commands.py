"""``gnau table``, ``gnau operator`` and ``gnau gaming``: the table catalogue, from the host.

Each change is made on the service's database with its log key, as ``gnau key rotate`` is, and
is one signed log entry whose actor is ``console`` (:mod:`gnau_service.audit.actors`): running
services take it up at their next ``Shuffle``, without a restart. What each field means, and
when a table deals: :mod:`gnau_service.rounds.catalogue` and docs/operations.md, *Tables*.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Coroutine
from fractions import Fraction
from typing import Any, Final

from gnau_service.audit.actors import CONSOLE
from gnau_service.audit.signing import LogSigner
from gnau_service.cli.failing import fail
from gnau_service.cli.settings_flags import add_settings_flags, settings_from_args
from gnau_service.common.private_files import KeyFileError
from gnau_service.rounds.catalogue import (
    Catalogue,
    CatalogueEntry,
    CatalogueError,
    OperatorConfig,
    RtpBand,
    TableConfig,
    with_changes,
)
from gnau_service.rounds.refusals import DealerError
from gnau_service.rules.currency import Currency
from gnau_service.rules.errors import RulesError
from gnau_service.rules.house_rules import HouseRules
from gnau_service.server.process.config import ConfigError
from gnau_service.store import DatabaseUrlError, StoreError, open_store

CATALOGUE_SETTINGS: Final = ("data_dir", "database", "key", "origin")


def add_table_arguments(table: argparse.ArgumentParser) -> None:
    commands = table.add_subparsers(dest="table_command", required=True, metavar="COMMAND")
    add = commands.add_parser(
        "add",
        help="catalogue a new table of an operator",
        description="Catalogue a table: the rounds of its operator are then dealt only at its "
        "catalogued tables.",
    )
    _table_name(add)
    add.add_argument("--currency", required=True, help="ISO 4217 code of its stakes (EUR, JPY)")
    _limits(add)
    add.add_argument("--disabled", action="store_true", help="add it disabled")
    add.set_defaults(run=run_add)
    change = commands.add_parser(
        "set",
        help="change a table's configuration (a new version)",
        description="Give the "
        "fields to change; the others stay. Open rounds keep the version they were shuffled under.",
    )
    _table_name(change)
    change.add_argument("--currency", help="ISO 4217 code of its stakes")
    _limits(change)
    change.set_defaults(run=run_set)
    for name, enabled in (("enable", True), ("disable", False)):
        switch = commands.add_parser(
            name,
            help=f"{name} a table" + ("" if enabled else ": no new round; open ones complete"),
        )
        _table_name(switch)
        add_settings_flags(switch, CATALOGUE_SETTINGS)
        switch.set_defaults(run=_switch_table(enabled))
    listing = commands.add_parser("list", help="the tables in force, as JSON lines")
    listing.add_argument("--operator", help="one operator's tables (default: every operator's)")
    add_settings_flags(listing, CATALOGUE_SETTINGS)
    listing.set_defaults(run=run_list)


def add_operator_arguments(operator: argparse.ArgumentParser) -> None:
    commands = operator.add_subparsers(dest="operator_command", required=True, metavar="COMMAND")
    change = commands.add_parser(
        "set", help="an operator's RTP band, or enable and disable all of its tables"
    )
    change.add_argument("operator", help="operator id")
    change.add_argument(
        "--rtp-band",
        metavar="LOW:HIGH",
        help="the return to player its rule sets must have, e.g. 0.92:0.97 (none: no band)",
    )
    on_off = change.add_mutually_exclusive_group()
    on_off.add_argument("--enable", action="store_true", help="it may deal again")
    on_off.add_argument("--disable", action="store_true", help="none of its tables deals")
    add_settings_flags(change, CATALOGUE_SETTINGS)
    change.set_defaults(run=run_operator)


def add_gaming_arguments(gaming: argparse.ArgumentParser) -> None:
    commands = gaming.add_subparsers(dest="gaming_command", required=True, metavar="COMMAND")
    for name, enabled in (("enable", True), ("disable", False)):
        switch = commands.add_parser(
            name,
            help="every table may deal again"
            if enabled
            else "no table of any operator starts a round; open rounds complete",
        )
        add_settings_flags(switch, CATALOGUE_SETTINGS)
        switch.set_defaults(run=_switch_gaming(enabled))


def _table_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("operator", help="operator id")
    parser.add_argument("table_id", help="the table's id, the operator's own")


def _limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rules",
        action="append",
        metavar="KEY=VALUE,...",
        help="an approved rule set, its rules that differ from the defaults (repeat for more; "
        "'default' for the defaults); `gnau table set` replaces the list",
    )
    parser.add_argument(
        "--min-stake",
        dest="table_min_stake",
        type=int,
        help="least stake of a seat, in minor units",
    )
    parser.add_argument(
        "--max-stake", dest="table_max_stake", type=int, help="most stake of a seat, in minor units"
    )
    parser.add_argument(
        "--max-seats", dest="table_max_seats", type=int, help="most seats of a round"
    )
    parser.add_argument("--deal-deadline", dest="table_deal_seconds", type=int, metavar="SECONDS")
    parser.add_argument(
        "--settle-deadline", dest="table_settle_seconds", type=int, metavar="SECONDS"
    )
    add_settings_flags(parser, CATALOGUE_SETTINGS)


def _rule_sets(given: list[str] | None) -> tuple[HouseRules, ...] | None:
    if given is None:
        return None
    return tuple(
        HouseRules()
        if text.strip() == "default"
        else HouseRules.from_assignments(part for part in text.split(",") if part.strip())
        for text in given
    )


def _changes(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "currency": None if args.currency is None else Currency.of(args.currency),
        "rule_sets": _rule_sets(args.rules),
        "min_stake": args.table_min_stake,
        "max_stake": args.table_max_stake,
        "max_seats": args.table_max_seats,
        "deal_seconds": args.table_deal_seconds,
        "settle_seconds": args.table_settle_seconds,
    }


def _run(
    args: argparse.Namespace,
    command: str,
    work: Callable[[Catalogue], Coroutine[Any, Any, list[str]]],
) -> int:
    try:
        settings = settings_from_args(args)
        signer = LogSigner.from_key_file(settings.origin, settings.key_path)
        with open_store(settings.database_url, signer) as store:
            lines = asyncio.run(work(Catalogue(store)))
    except (
        CatalogueError,
        DealerError,
        RulesError,
        ConfigError,
        KeyFileError,
        DatabaseUrlError,
        StoreError,
        OSError,
        ValueError,
    ) as error:
        return fail(command, str(error))
    for line in lines:
        print(line)
    return 0


def _line(entry: CatalogueEntry) -> str:
    return json.dumps(entry.to_json(), sort_keys=True, separators=(",", ":"))


def run_add(args: argparse.Namespace) -> int:
    async def work(catalogue: Catalogue) -> list[str]:
        changes = {k: v for k, v in _changes(args).items() if v is not None}
        if "rule_sets" not in changes:
            raise CatalogueError("name the approved rule sets: --rules KEY=VALUE,... or default")
        config = TableConfig(**changes, enabled=not args.disabled)
        entry = await catalogue.add_table(args.operator, args.table_id, config, actor=CONSOLE)
        return [f"added table {entry.table_id!r} of {entry.operator!r}, version 1", _line(entry)]

    return _run(args, "table add", work)


def run_set(args: argparse.Namespace) -> int:
    async def work(catalogue: Catalogue) -> list[str]:
        changes = _changes(args)
        entry = await catalogue.change_table(
            args.operator,
            args.table_id,
            lambda config: with_changes(config, **changes),
            actor=CONSOLE,
        )
        return [f"table {entry.table_id!r} of {entry.operator!r}: version {entry.version}"]

    return _run(args, "table set", work)


def _switch_table(enabled: bool) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        async def work(catalogue: Catalogue) -> list[str]:
            entry = await catalogue.change_table(
                args.operator,
                args.table_id,
                lambda config: with_changes(config, enabled=enabled),
                actor=CONSOLE,
            )
            state = "enabled" if enabled else "disabled: no new round; open rounds complete"
            return [f"table {entry.table_id!r} of {entry.operator!r} {state}"]

        return _run(args, "table enable" if enabled else "table disable", work)

    return run


def run_list(args: argparse.Namespace) -> int:
    async def work(catalogue: Catalogue) -> list[str]:
        return [_line(entry) for entry in await catalogue.tables(args.operator)]

    return _run(args, "table list", work)


def _band(text: str) -> RtpBand | None:
    if text.strip().lower() == "none":
        return None
    low, sep, high = text.partition(":")
    if not sep:
        raise CatalogueError(f"--rtp-band must be LOW:HIGH (e.g. 0.92:0.97), not {text!r}")
    return RtpBand(Fraction(low.strip()), Fraction(high.strip()))


def run_operator(args: argparse.Namespace) -> int:
    async def work(catalogue: Catalogue) -> list[str]:
        band = None if args.rtp_band is None else _band(args.rtp_band)

        def change(config: OperatorConfig) -> OperatorConfig:
            enabled = True if args.enable else False if args.disable else config.enabled
            kept = config.rtp_band if args.rtp_band is None else band
            return OperatorConfig(enabled=enabled, rtp_band=kept)

        config = await catalogue.set_operator(args.operator, change, actor=CONSOLE)
        return [
            f"operator {args.operator!r}: "
            + json.dumps(config.to_json(), sort_keys=True, separators=(",", ":"))
        ]

    return _run(args, "operator set", work)


def _switch_gaming(enabled: bool) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        async def work(catalogue: Catalogue) -> list[str]:
            changed = await catalogue.set_gaming(enabled, actor=CONSOLE)
            state = "on" if enabled else "off: no new round anywhere; open rounds complete"
            return [f"gaming {state}" + ("" if changed else " (it already was)")]

        return _run(args, "gaming enable" if enabled else "gaming disable", work)

    return run
