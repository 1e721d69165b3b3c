"""One set of TLS options (``--tls-ca``, ``--tls-server-name``) on every command that calls a
service, and each of them used against a real TLS ``gnau serve`` whose certificate names
``localhost`` while the commands call 127.0.0.1, as through a port-forward."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gnau_service.cli.main import build_parser
from tests.cli.test_target_variable import target_options
from tests.conftest import Run
from tests.server.test_tls_and_config import localhost_tls_files
from tests.serving import gnau as gnau_process
from tests.serving import served

# make test-system: the commands against a `gnau serve` process over TLS.
pytestmark = pytest.mark.system

Gnau = Callable[..., Run]


def test_every_command_with_a_target_has_the_tls_options() -> None:
    for command, _ in target_options(build_parser()):
        parser = build_parser()
        for word in command:
            parser = next(
                a.choices[word]
                for a in parser._actions
                if hasattr(a, "choices") and a.choices and word in a.choices
            )
        options = {o for action in parser._actions for o in action.option_strings}
        assert {"--tls-ca", "--tls-server-name"} <= options, command


def test_the_client_commands_reach_a_tls_service_through_a_port_forward(
    gnau: Gnau, tmp_path: Path
) -> None:
    with served(tmp_path / "data", *localhost_tls_files(tmp_path)) as service:
        tls = ("--target", service.target, "--tls-ca", str(tmp_path / "ca.pem"))
        named = (*tls, "--tls-server-name", "localhost")
        played = gnau_process("play", *named, "--token", service.token)
        assert played.returncode == 0, played.stderr
        assert "1 of 1 rounds verified independently" in played.stdout
        (round_id,) = re.findall(r"\br-[0-9a-f]+\b", played.stdout)
        # Without the name, the certificate (of localhost) does not match 127.0.0.1.
        unnamed = gnau_process("play", *tls, "--token", service.token)
        assert unnamed.returncode == 2 and "UNAVAILABLE" in unnamed.stderr
        token = ("--token", service.token)
        # The whole log is an auditor of every operator's to read.
        auditor = ("--token", service.add_token("audit", "--role", "auditor", "--all-operators"))
        for command in (
            ("round", "get", round_id, *token),
            ("receipt", "get", round_id),
            ("audit", "checkpoint"),
            ("audit", "show", *auditor),
            ("key", "show"),
            ("health",),
        ):
            done = gnau(*command, *named)
            assert done.status == 0, (command, done.err)
        # A name without a CA is refused before any call, the same way everywhere.
        lone = gnau("round", "get", round_id, "--target", service.target,
                    "--tls-server-name", "localhost")  # fmt: skip
        assert lone.status == 2 and "--tls-server-name needs --tls-ca" in lone.err
