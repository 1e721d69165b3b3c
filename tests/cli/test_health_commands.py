"""``gnau health`` against a real ``gnau serve`` process: each answer and its exit status (the
probe without arguments as a process of its own, the rest in-process)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.server.test_tls_and_config import localhost_tls_files
from tests.serving import free_port, served
from tests.serving import gnau as gnau_process

# make test-system: the commands against `gnau serve` processes.
pytestmark = pytest.mark.system

Gnau = Callable[..., Run]


def test_serving_unknown_and_unreachable(gnau: Gnau, tmp_path: Path) -> None:
    with served(tmp_path / "data") as service:
        ok = gnau("health", "--target", service.target)
        assert (ok.status, ok.out) == (0, f"{service.target}: SERVING\n")
        dealer = gnau("health", "--target", service.target, "--service", "gnau.v1.DealerService")
        assert dealer.status == 0
        unknown = gnau("health", "--target", service.target, "--service", "gnau.v1.Nothing")
        assert unknown.status == 1
        assert unknown.err == f"{service.target}: service 'gnau.v1.Nothing' is unknown to it\n"
        # No --target: the port of GNAU_LISTEN, its wildcard host read as this machine.
        port = service.target.rsplit(":", 1)[1]
        env = {**os.environ, "GNAU_LISTEN": f"0.0.0.0:{port}"}
        by_default = gnau_process("health", env=env)
        assert (by_default.returncode, by_default.stdout) == (0, f"127.0.0.1:{port}: SERVING\n")
    nobody = f"127.0.0.1:{free_port()}"
    unreachable = gnau("health", "--target", nobody, "--timeout", "1")
    assert unreachable.status == 2
    assert unreachable.out == ""
    assert unreachable.err.startswith(f"gnau health: {nobody}: ")
    assert unreachable.err.count("\n") == 1


def test_draining_service_is_not_serving(gnau: Gnau, tmp_path: Path) -> None:
    """On SIGTERM health turns NOT_SERVING for the notice period before the port closes."""
    with served(tmp_path / "data", "--shutdown-notice-seconds", "3") as service:
        service.process.send_signal(signal.SIGTERM)
        answers = [gnau("health", "--target", service.target) for _ in range(3)]
        draining = [answer for answer in answers if answer.status != 0]
        assert draining, "health stayed SERVING after SIGTERM"
        assert (draining[0].status, draining[0].out) == (
            1,
            f"{service.target}: NOT_SERVING\n",
        )


def test_over_tls_with_the_certificates_name(gnau: Gnau, tmp_path: Path) -> None:
    with served(tmp_path / "data", *localhost_tls_files(tmp_path)) as service:
        ca_file = str(tmp_path / "ca.pem")
        named = gnau(
            "health", "--target", service.target, "--tls-ca", ca_file,
            "--tls-server-name", "localhost",
        )  # fmt: skip
        assert (named.status, named.out) == (0, f"{service.target}: SERVING\n")
        # The certificate names localhost, not 127.0.0.1: without the name the handshake fails.
        unnamed = gnau("health", "--target", service.target, "--tls-ca", ca_file)
        assert unnamed.status == 2
        plaintext = gnau("health", "--target", service.target, "--timeout", "2")
        assert plaintext.status == 2


def test_unusable_arguments(gnau: Gnau, tmp_path: Path) -> None:
    lone_name = gnau("health", "--tls-server-name", "localhost")
    assert lone_name.status == 2
    assert lone_name.err == "gnau health: --tls-server-name needs --tls-ca\n"
    missing_ca = gnau("health", "--tls-ca", str(tmp_path / "missing.pem"))
    assert missing_ca.status == 2
    assert missing_ca.err.startswith(f"gnau health: --tls-ca {tmp_path / 'missing.pem'}: ")
    bad_listen = gnau("health", env={"GNAU_LISTEN": "50051"})
    assert bad_listen.status == 2
    assert bad_listen.err == "gnau health: GNAU_LISTEN: expected host:port, got '50051'\n"
