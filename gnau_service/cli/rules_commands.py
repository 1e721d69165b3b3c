"""``gnau evaluate``, ``gnau settle`` and ``gnau stats``: the rules core on the command line
(``gnau par`` is :mod:`gnau_service.cli.par_commands`).

``evaluate`` and ``settle`` read one item per line. A bad line is reported with its number
and the reason (in ``--json`` mode as ``{"line": N, "error": "..."}`` in place of its result),
the other lines still go through, and the exit status is 1 if any line was bad.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

from gnau_service.common.strict_json import JsonTextError, read_json
from gnau_service.rules.cards import Card, parse_cards
from gnau_service.rules.errors import RulesError
from gnau_service.rules.evaluation import Evaluator
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.settlement import PlayerHand, settle
from gnau_service.rules.stats import hand_stats


class LineError(ValueError):
    """One input line that cannot be used; the message names the problem."""


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Evaluate one hand given as five cards, or one hand per line of stdin."
    add_rule_option(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object per hand")
    parser.add_argument("cards", nargs="*", metavar="CARD", help="five cards, e.g. KD 4C 3S AS QC")
    parser.set_defaults(run=run_evaluate)


def add_settle_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        'Read JSON lines {"dealer": "KD 4C 3S 8D 5D", "players": [{"seat": 1, '
        '"cards": "...", "stake": 10}]} and print each table settled.'
    )
    add_rule_option(parser)
    parser.set_defaults(run=run_settle)


def add_stats_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Count every category and value over all hands of the configured decks."
    add_rule_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run_stats)


def add_rule_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rule",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a house rule, e.g. ten_is_duke=true or tie=push (repeatable)",
    )


def _house_rules(args: argparse.Namespace) -> HouseRules | None:
    try:
        return HouseRules.from_assignments(args.rule)
    except RulesError as error:
        print(f"gnau {args.command}: {error}", file=sys.stderr)
        return None


def run_evaluate(args: argparse.Namespace) -> int:
    rules = _house_rules(args)
    if rules is None:
        return 2
    evaluator = Evaluator(rules)
    lines = [" ".join(args.cards)] if args.cards else sys.stdin
    bad = 0
    for number, line in _numbered(lines):
        try:
            evaluation = evaluator.evaluate(parse_cards(line))
        except RulesError as error:
            bad += 1
            _report_bad_line(number, str(error), as_json=args.json)
            continue
        print(json.dumps(evaluation.to_json()) if args.json else evaluation.describe())
    return 1 if bad else 0


def run_settle(args: argparse.Namespace) -> int:
    rules = _house_rules(args)
    if rules is None:
        return 2
    bad = 0
    for number, line in _numbered(sys.stdin):
        try:
            dealer, players = _parse_table(line)
            settlement = settle(dealer, players, rules)
        except (LineError, RulesError) as error:
            bad += 1
            _report_bad_line(number, str(error), as_json=True)
            continue
        print(json.dumps(settlement.to_json()))
    return 1 if bad else 0


def run_stats(args: argparse.Namespace) -> int:
    rules = _house_rules(args)
    if rules is None:
        return 2
    started = time.perf_counter()
    stats = hand_stats(rules)
    seconds = time.perf_counter() - started
    if args.json:
        print(
            json.dumps(
                {
                    "rules": rules.as_dict(),
                    "total": stats.total,
                    "categories": stats.categories,
                    "values": stats.values,
                    "seconds": round(seconds, 4),
                }
            )
        )
        return 0
    print(f"{stats.total:,} hands of {rules.decks} deck(s), best first:")
    for rank, count in stats.by_rank.items():
        print(f"  {rank!s:<14} {count:>12,}  {100 * count / stats.total:8.4f}%")
    print(f"computed in {seconds:.3f} s")
    return 0


def _numbered(lines: Any) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based line numbers."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, line


def _report_bad_line(number: int, error: str, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"line": number, "error": error}))
    else:
        print(f"line {number}: {error}", file=sys.stderr)


def _parse_table(line: str) -> tuple[tuple[Card, ...], list[PlayerHand]]:
    try:
        table = read_json(line)
    except JsonTextError as error:
        raise LineError(str(error)) from None
    if not isinstance(table, dict):
        raise LineError("a table must be a JSON object with 'dealer' and 'players'")
    _refuse_unknown_keys(table, {"dealer", "players"}, "table")
    if "dealer" not in table or "players" not in table:
        raise LineError("a table needs both 'dealer' and 'players'")
    dealer = _cards_field(table["dealer"], "dealer")
    if not isinstance(table["players"], list) or not table["players"]:
        raise LineError("'players' must be a non-empty list")
    players = []
    for position, player in enumerate(table["players"], start=1):
        if not isinstance(player, dict):
            raise LineError(f"player {position} must be an object with seat, cards and stake")
        _refuse_unknown_keys(player, {"seat", "cards", "stake"}, f"player {position}")
        missing = {"seat", "cards", "stake"} - player.keys()
        if missing:
            raise LineError(f"player {position} lacks {', '.join(sorted(missing))}")
        for key in ("seat", "stake"):
            if not isinstance(player[key], int) or isinstance(player[key], bool):
                raise LineError(f"player {position}: {key} must be an integer, got {player[key]!r}")
        players.append(
            PlayerHand(
                seat=player["seat"],
                cards=_cards_field(player["cards"], f"player {position} cards"),
                stake=player["stake"],
            )
        )
    return dealer, players


def _cards_field(value: object, name: str) -> tuple[Card, ...]:
    if isinstance(value, str):
        return parse_cards(value)
    if isinstance(value, list) and all(isinstance(token, str) for token in value):
        return parse_cards(value)
    raise LineError(f"{name} must be a string of cards like 'KD 4C 3S 8D 5D'")


def _refuse_unknown_keys(obj: dict[str, Any], known: set[str], what: str) -> None:
    unknown = sorted(set(obj) - known)
    if unknown:
        raise LineError(f"{what} has unknown key(s): {', '.join(unknown)}")
