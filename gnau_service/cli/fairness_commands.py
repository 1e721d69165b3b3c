"""``gnau round verify [FILE]``: check a revealed round from its JSON form.

Exit statuses:

- 0: the round verifies; one summary line on stdout.
- 1: it was read but does not verify; a line naming the first failed check (the reason),
  then one line per later failure.
- 2: it could not be used (unreadable file, not JSON, a missing or malformed field); one line
  on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

from gnau_service.cli.failing import fail

EXIT_VALID: Final = 0
EXIT_INVALID: Final = 1
EXIT_BAD_INPUT: Final = 2
STDIN: Final = "-"


def add_round_verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Recompute a revealed round from its server seed and check the commitment, the "
        "lock (transcript hash), the deck and every hand. Exit 0 if it verifies, 1 if it "
        "does not, 2 if the file cannot be used. docs/fairness.md describes the JSON form."
    )
    parser.add_argument(
        "file",
        metavar="FILE",
        nargs="?",
        default=STDIN,
        help=f"the revealed round as JSON; {STDIN} or none for standard input "
        "(gnau round get ID --json | gnau round verify)",
    )
    parser.set_defaults(run=run_round_verify)


def run_round_verify(args: argparse.Namespace) -> int:
    """Verify the revealed round in ``args.file`` and print the outcome."""
    # Imported here: the fairness core is slow to import, and every ``gnau round`` command
    # imports this module, ``round get`` too, which does not use it.
    from gnau_service.fairness import (  # noqa: PLC0415
        FairnessError,
        RevealedRound,
        verify_revealed_round,
    )

    source: str = args.file
    try:
        text = sys.stdin.read() if source == STDIN else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return _bad_input(source, f"cannot read: {_reason(error)}")
    try:
        revealed = RevealedRound.from_json_text(text)
    except FairnessError as error:
        return _bad_input(source, str(error))
    report = verify_revealed_round(revealed)
    print(report.summary())
    if report.ok:
        return EXIT_VALID
    for failure in report.failures[1:]:  # the summary names the first
        print(f"  also failed: {failure}")
    return EXIT_INVALID


def _bad_input(source: str, message: str) -> int:
    name = "standard input" if source == STDIN else source
    return fail("round verify", f"{name}: {message}")


def _reason(error: OSError | UnicodeDecodeError) -> str:
    if isinstance(error, UnicodeDecodeError):
        return f"not UTF-8 text (byte {error.start})"
    return error.strerror or str(error)
