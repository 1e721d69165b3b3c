"""``gnau token``: add, list and revoke the bearer tokens of the token file.

- ``gnau token add --role operator|auditor|public [--operator OPERATOR | --all-operators]
  [--name NAME] [--out FILE]``
- ``gnau token list``
- ``gnau token revoke NAME``

An operator or auditor token belongs to one operator (``--operator casino-a``); an auditor's may
belong to every operator instead (``--all-operators``, or ``--operator '*'``, quoted so that the
shell does not expand it). Without either, an operator token belongs to the operator
``default`` and an auditor token to every operator, as tokens did before operators. A public
token belongs to none.

Each takes the service's settings for where the file is (``--config``, ``--data-dir``,
``--tokens`` and their ``GNAU_*`` variables). The file keeps only hashes
(:mod:`~gnau_service.server.process.tokens`); a new token is handed over once: on stdout if it is a
terminal, else only to ``--out FILE`` (written at 0600), never to a log. ``list`` shows names,
roles, operators (``-`` for a public token's) and creation times, never a token. A running
service rereads the file within a second of a change (or at once on SIGHUP).

Exit statuses: 0 done; 1 ``revoke`` found no token of that name; 2 nothing was changed: a
setting, the token file or ``--out`` cannot be used, or a new token would have nowhere safe to
go.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gnau_service.audit.operators import ALL_OPERATORS
from gnau_service.cli.failing import fail
from gnau_service.cli.settings_flags import add_settings_flags, settings_from_args
from gnau_service.common.private_files import write_private_file
from gnau_service.server.grpc.auth import AuthConfigError, Role
from gnau_service.server.process.config import ConfigError
from gnau_service.server.process.tokens import (
    TokenNotFound,
    TokenRecord,
    add_token,
    default_name,
    list_tokens,
    revoke_token,
)

#: The settings that say where the token file is.
TOKEN_SETTINGS = ("data_dir", "tokens")


def add_token_arguments(token: argparse.ArgumentParser) -> None:
    commands = token.add_subparsers(dest="token_command", required=True, metavar="COMMAND")

    add = commands.add_parser(
        "add",
        help="add a token; show it once (on a terminal) or write it to --out",
        description="Add a fresh token with a role. The token is shown only on a terminal; "
        "elsewhere pass --out FILE (written at mode 0600).",
    )
    add.add_argument("--role", required=True, choices=[str(role) for role in Role])
    belongs = add.add_mutually_exclusive_group()
    belongs.add_argument(
        "--operator",
        help="the operator it belongs to (an operator id; '*', quoted, for an auditor of every "
        "operator; default: 'default' for an operator token, every operator for an auditor's)",
    )
    belongs.add_argument(
        "--all-operators",
        action="store_true",
        help="an auditor token of every operator (the same as --operator '*')",
    )
    add.add_argument("--name", help="a unique name for it (default: the role and 8 hex digits)")
    add.add_argument("--out", type=Path, help="write the token to this file (mode 0600)")
    add_settings_flags(add, TOKEN_SETTINGS)
    add.set_defaults(run=run_add)

    listing = commands.add_parser(
        "list", help="the tokens' names, roles, operators and creation times"
    )
    add_settings_flags(listing, TOKEN_SETTINGS)
    listing.set_defaults(run=run_list)

    revoke = commands.add_parser("revoke", help="remove a token: refused from the next call")
    revoke.add_argument("name", help="the token's name (see gnau token list)")
    add_settings_flags(revoke, TOKEN_SETTINGS)
    revoke.set_defaults(run=run_revoke)


def _token_path(args: argparse.Namespace) -> Path:
    return settings_from_args(args).tokens_path


def run_add(args: argparse.Namespace) -> int:
    os.umask(0o077)
    out: Path | None = args.out
    if out is None and not sys.stdout.isatty():
        return fail(
            "token add",
            "stdout is not a terminal, and a token must not reach a log: pass --out FILE",
        )

    def hand_over(token: str) -> None:
        if out is not None:
            write_private_file(out, (token + "\n").encode("utf-8"))

    role = Role(args.role)
    operator: str | None = ALL_OPERATORS if args.all_operators else args.operator
    try:
        path = _token_path(args)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        record, token = add_token(
            path, role, args.name or default_name(role), hand_over, operator=operator
        )
    except (ConfigError, AuthConfigError, ValueError, OSError) as error:
        return fail("token add", str(error))
    print(f"added token {record.name} ({_described(record)}) to {path}")
    if out is None:
        print(f"the token, shown only this once:\n{token}")
    else:
        print(f"the token is in {out} (mode 0600)")
    return 0


def run_list(args: argparse.Namespace) -> int:
    try:
        records = list_tokens(_token_path(args))
    except (ConfigError, AuthConfigError, OSError) as error:
        return fail("token list", str(error))
    if not records:
        print("no tokens")
    width = max((len(record.name) for record in records), default=0)
    operators = max((len(record.operator or "-") for record in records), default=0)
    for record in records:
        print(
            f"{record.name:<{width}}  {record.role:<8}  {record.operator or '-':<{operators}}  "
            f"{record.created or '-'}"
        )
    return 0


def _described(record: TokenRecord) -> str:
    """The token's role and operator, as ``add`` and ``revoke`` say them."""
    if record.operator is None:
        return str(record.role)
    if record.operator == ALL_OPERATORS:
        return f"{record.role} of every operator"
    return f"{record.role} of {record.operator}"


def run_revoke(args: argparse.Namespace) -> int:
    try:
        path = _token_path(args)
        record = revoke_token(path, args.name)
    except TokenNotFound:
        print(f"gnau token revoke: no token named {args.name[:64]!r}", file=sys.stderr)
        return 1
    except (ConfigError, AuthConfigError, OSError) as error:
        return fail("token revoke", str(error))
    print(
        f"revoked token {record.name} ({_described(record)}); a running service refuses it "
        "within a second"
    )
    return 0
