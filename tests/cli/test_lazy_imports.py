"""Each ``gnau`` command imports only what it runs (``bench/bench_cli_startup.py`` times it).

Checked in a fresh interpreter, as a process would start: ``gnau --help`` and ``--version``
import no command module at all, and the client commands (those calling a service over
``--target``) none of the server, the store, psycopg or aiohttp. No timing is asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gnau_service.cli import audit_commands
from gnau_service.cli.remote import DEFAULT_TARGET
from gnau_service.server.process.config import Settings
from gnau_service.store import DEFAULT_DATABASE_URL

HEAVY = ("grpc", "google.protobuf", "cryptography", "psycopg", "aiohttp", "structlog", "numpy")
SERVER_SIDE = ("gnau_service.server", "gnau_service.store", "psycopg", "aiohttp", "structlog")

#: Parses ``argv`` as ``gnau`` does (running --help or --version), then prints the modules.
PROBE = """
import json, sys
from gnau_service.cli.main import build_parser, main, named_command
argv = json.loads(sys.argv[1])
try:
    if argv[0].startswith("-"):
        main(argv)
    else:
        build_parser(only=(named_command(argv),)).parse_args(argv)
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def imported_by(*argv: str) -> list[str]:
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        check=True,
    )
    modules: list[str] = json.loads(probe.stdout.splitlines()[-1])
    return modules


def within(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    return [name for name in modules if name.split(".")[0] in packages or name.startswith(packages)]


@pytest.mark.parametrize("option", ["--help", "--version"])
def test_help_and_version_import_no_command(option: str) -> None:
    modules = imported_by(option)
    assert within(modules, HEAVY) == []
    assert within(modules, ("gnau_service.server", "gnau_service.store")) == []
    commands = [name for name in modules if name.startswith("gnau_service.cli.")]
    assert commands == ["gnau_service.cli.main"]


@pytest.mark.parametrize(
    "argv",
    [
        ("health", "--target", "127.0.0.1:1"),
        ("round", "get", "r-1", "--target", "127.0.0.1:1"),
        ("receipt", "get", "r-1", "--target", "127.0.0.1:1"),
        ("audit", "export", "--target", "127.0.0.1:1", "--out", "bundle.jsonl"),
        ("audit", "show", "--target", "127.0.0.1:1"),
        ("play", "--target", "127.0.0.1:1"),
    ],
)
def test_client_commands_import_nothing_of_the_server(argv: tuple[str, ...]) -> None:
    assert within(imported_by(*argv), SERVER_SIDE) == []


def test_the_light_modules_copies_of_defaults_are_the_owners() -> None:
    """What the client commands' help shows without importing the settings or the store."""
    assert Settings().listen == DEFAULT_TARGET
    assert audit_commands.DEFAULT_DATABASE_URL == DEFAULT_DATABASE_URL
