"""``GNAU_TARGET``: the default of every command's ``--target``, before 127.0.0.1:50051."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gnau_service.cli.main import build_parser
from tests.conftest import Run
from tests.serving import gnau as gnau_process
from tests.serving import served

Gnau = Callable[..., Run]


def target_options(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    """(command words, the --target action) of every command that has one."""
    for action in parser._actions:
        if "--target" in action.option_strings:
            yield path, action
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield from target_options(subparser, (*path, name))


def test_every_target_option_defaults_to_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNAU_TARGET", "dealer.example:443")
    found = dict(target_options(build_parser()))
    # The commands that call a service: none may be missed, whichever module adds one.
    assert {
        ("play",),
        ("receipt", "get"),
        ("round", "get"),
        ("audit", "export"),
        ("audit", "checkpoint"),
        ("audit", "show"),
        ("audit", "round"),
    } <= set(found)
    for command, action in found.items():
        assert action.default == "dealer.example:443", command
        assert "GNAU_TARGET" in str(action.help), command


def test_without_the_variable_only_the_audit_commands_read_a_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GNAU_TARGET", raising=False)
    for command, action in target_options(build_parser()):
        # The audit commands and gnau key show read a database, and gnau health asks this
        # machine's own service (at GNAU_LISTEN's port: tests/deploy), unless a target is named.
        reads_a_database = command[0] in ("audit", "health") or command == ("key", "show")
        # gnau receipt verify and gnau software verify work offline; they ask a service only
        # when told which.
        offline = command in (("receipt", "verify"), ("software", "verify"))
        expected = None if reads_a_database or offline else "127.0.0.1:50051"
        assert action.default == expected, command


@pytest.mark.system
def test_the_commands_find_a_served_process_through_the_variable(
    gnau: Gnau, tmp_path: Path
) -> None:
    """``play`` and ``round get`` as processes of their own, the other commands in-process."""
    with served(tmp_path / "data") as service:
        variable = {"GNAU_TARGET": service.target}
        env = {**os.environ, **variable}
        # The token in the environment: one that starts with "-" would read as an option.
        played = gnau_process("play", env={**env, "GNAU_TOKEN": service.token})
        assert played.returncode == 0, played.stderr
        (round_id,) = re.findall(r"\br-[0-9a-f]+\b", played.stdout)
        fetched = gnau_process("round", "get", round_id, "--json", env=env)
        assert fetched.returncode == 0, fetched.stderr
        assert round_id in fetched.stdout
        receipt = tmp_path / "r.json"
        got = gnau("receipt", "get", round_id, "--out", str(receipt), env=variable)
        assert got.status == 0, got.err
        verified = gnau("receipt", "verify", str(receipt), "--key", service.vkey)
        assert verified.status == 0, verified.out
        auditor = service.add_token("audit", "--role", "auditor", "--all-operators")
        shown = gnau("audit", "show", env={**variable, "GNAU_TOKEN": auditor})
        assert shown.status == 0, shown.err
        assert round_id in shown.out
        # A --database on the command line wins over the variable.
        stopped = {"GNAU_TARGET": "127.0.0.1:9"}
        local = gnau("audit", "show", "--database", service.database, env=stopped)
        assert local.status == 0, local.err
        assert round_id in local.out
        # And the variable is really used: a target that does not answer is named.
        refused = gnau("round", "get", round_id, env=stopped)
        assert refused.status == 2
        assert refused.err.startswith("gnau round get: 127.0.0.1:9: UNAVAILABLE"), refused.err
