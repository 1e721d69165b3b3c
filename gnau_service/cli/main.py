"""Entry point of the ``gnau`` command.

:data:`COMMANDS` lists every command with its line in ``gnau --help`` and the function that adds
its arguments, ``add_<command>_arguments(parser)`` in the command's module, which sets
``run=<function(args) -> exit status>`` as the parser's default. Exit statuses: 0 success, 1 the
input was read but something in it is bad or does not verify, 2 the input could not be used.

A command's module is imported only when that command is parsed: ``gnau --help`` and
``gnau --version`` import none, and each command imports only what it runs (the server, grpc,
cryptography and psycopg take most of a second between them; ``bench/bench_cli_startup.py``
measures it).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from gnau_service import __version__


@dataclass(frozen=True)
class Command:
    """A ``gnau`` command: its ``name``, its line in ``gnau --help``, and ``arguments``, the
    ``module:function`` (in this package) that adds its arguments to its parser."""

    name: str
    help: str
    arguments: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        module, function = self.arguments.split(":")
        getattr(importlib.import_module(f"gnau_service.cli.{module}"), function)(parser)


#: Every command, in the order ``gnau --help`` lists them.
COMMANDS: Final = (
    Command("evaluate", "evaluate five-card hands", "rules_commands:add_evaluate_arguments"),
    Command("settle", "settle tables given as JSON lines", "rules_commands:add_settle_arguments"),
    Command("stats", "exact count of every hand rank", "rules_commands:add_stats_arguments"),
    Command(
        "par",
        "exact PAR sheet (RTP, house edge, every outcome) of a rule set",
        "par_commands:add_par_arguments",
    ),
    Command("audit", "export, verify and read the audit log", "audit_commands:add_audit_arguments"),
    Command(
        "report",
        "rounds, stakes, payouts and actual against exact RTP per table, rule set and period",
        "report_commands:add_report_arguments",
    ),
    Command(
        "player",
        "forget a player: delete their key and seat links (crypto-shredding)",
        "player_commands:add_player_arguments",
    ),
    Command(
        "receipt",
        "fetch a round's receipt, and verify one offline",
        "receipt_commands:add_receipt_arguments",
    ),
    Command(
        "round",
        "fetch rounds from a running service, and verify one offline",
        "receipt_commands:add_round_arguments",
    ),
    Command("serve", "run the dealer service", "serve_commands:add_serve_arguments"),
    Command(
        "play",
        "play rounds against a running service, show and verify them",
        "play_commands:add_play_arguments",
    ),
    Command(
        "health",
        "ask a running service whether it is serving (exit 0 if SERVING)",
        "health_commands:add_health_arguments",
    ),
    Command(
        "db",
        "the database: schema status and migrations, backup and restore",
        "db_commands:add_db_arguments",
    ),
    Command("key", "manage the audit log's signing key", "key_commands:add_key_arguments"),
    Command(
        "software",
        "software authentication: write and verify the signed manifest of this installation",
        "software_commands:add_software_arguments",
    ),
    Command("token", "add, list and revoke bearer tokens", "token_commands:add_token_arguments"),
    Command(
        "table",
        "the table catalogue: add, set, enable, disable and list tables",
        "catalogue_commands:add_table_arguments",
    ),
    Command(
        "operator",
        "an operator's RTP band, and enabling or disabling all of its tables",
        "catalogue_commands:add_operator_arguments",
    ),
    Command(
        "gaming",
        "enable or disable every table of every operator",
        "catalogue_commands:add_gaming_arguments",
    ),
    Command(
        "witness",
        "run a transparency-log witness that cosigns consistent checkpoints",
        "witness_commands:add_witness_arguments",
    ),
    Command(
        "tiles",
        "publish the log as static C2SP tlog-tiles to a directory or an S3 bucket",
        "tiles_commands:add_tiles_arguments",
    ),
)


def build_parser(*, only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``gnau`` parser: every command listed, with the arguments of every command, or
    ``only`` of those named (the others' modules are not imported).

    >>> build_parser(only=()).parse_args(["stats"]).command
    'stats'
    """
    parser = argparse.ArgumentParser(
        prog="gnau", description="Gnau Dealer: a provably fair, audited dealer for Gnau."
    )
    parser.add_argument("--version", action="version", version=f"gnau {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command_parser = subparsers.add_parser(command.name, help=command.help)
        if only is None or command.name in only:
            command.add_arguments(command_parser)
    return parser


def named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (``gnau`` itself takes
    only ``--help`` and ``--version``, neither with a value).

    >>> named_command(["--help"]), named_command(["audit", "show", "--last", "2"])
    (None, 'audit')
    """
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = named_command(argv)
    args = build_parser(only=() if command is None else (command,)).parse_args(argv)
    try:
        status: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``gnau stats | head``): not an error worth a traceback.
        sys.stderr.close()
        return 0
    except Exception as error:  # the last resort: no command prints a traceback
        # Every expected failure is handled where it happens; reaching this is a bug. One line,
        # and only the error's type: its message might quote hostile input at any length.
        print(
            f"gnau: internal error ({type(error).__name__}) in 'gnau {args.command}': this is a "
            "bug, please report it",
            file=sys.stderr,
        )
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
