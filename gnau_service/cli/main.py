"""Entry point of the ``gnau`` command.

Each command module exposes ``register(subparsers)``, which adds its parsers and sets
``run=<function(args) -> exit status>`` as their default. Exit statuses: 0 success, 1 the
input was read but something in it is bad or does not verify, 2 the input could not be used.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gnau_service import __version__
from gnau_service.cli import (
    audit_commands,
    fairness_commands,
    key_commands,
    receipt_commands,
    rules_commands,
    serve_commands,
    token_commands,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gnau", description="Gnau Dealer: a provably fair, audited dealer for Gnau."
    )
    parser.add_argument("--version", action="version", version=f"gnau {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        rules_commands,
        fairness_commands,
        audit_commands,
        receipt_commands,
        serve_commands,
        key_commands,
        token_commands,
    ):
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
