"""Entry point of the ``gnau`` command.

Each command module exposes ``register(subparsers)``, which adds its parsers and sets
``run=<function(args) -> exit status>`` as their default. Exit statuses: 0 success, 1 the
input was read but something in it is bad or does not verify, 2 the input could not be used.

The rules commands (``gnau evaluate 3C 6S 8H 4H 8C``) are parsed without importing the other
command modules, whose imports (grpc, aiohttp, psycopg, the server) take most of a second.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from gnau_service import __version__
from gnau_service.cli import rules_commands


def build_parser(*, only: Sequence[ModuleType] | None = None) -> argparse.ArgumentParser:
    """The ``gnau`` parser with every command, or ``only`` those of these modules."""
    parser = argparse.ArgumentParser(
        prog="gnau", description="Gnau Dealer: a provably fair, audited dealer for Gnau."
    )
    parser.add_argument("--version", action="version", version=f"gnau {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in only if only is not None else _all_modules():
        module.register(subparsers)
    return parser


def _all_modules() -> tuple[ModuleType, ...]:
    from gnau_service.cli import (  # noqa: PLC0415  (imported only when needed: see above)
        audit_commands,
        db_commands,
        fairness_commands,
        health_commands,
        key_commands,
        receipt_commands,
        serve_commands,
        token_commands,
        witness_commands,
    )

    return (
        rules_commands,
        fairness_commands,
        audit_commands,
        receipt_commands,
        serve_commands,
        health_commands,
        db_commands,
        key_commands,
        token_commands,
        witness_commands,
    )


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The rules commands' parser alone if ``argv`` names one of them, else the whole one."""
    light = build_parser(only=(rules_commands,))
    commands = next(
        action.choices
        for action in light._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    return light if argv and argv[0] in commands else build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser_for(argv).parse_args(argv)
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
