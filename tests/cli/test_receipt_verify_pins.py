"""gnau receipt verify with a pinned checkpoint the receipt cannot prove (it was fetched without
``--pin``): "cannot check", exit 2, naming the command that gets a receipt which can; with
``--target``, the proof is fetched and the receipt checked (exit 0). Never "INVALID", exit 1,
which means tampering."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.serving import gnau as gnau_process
from tests.serving import served

# make test-system: the commands against a `gnau serve` process.
pytestmark = pytest.mark.system

Gnau = Callable[..., Run]


def test_a_receipt_without_the_pins_proof_cannot_be_checked_until_it_is_fetched(
    gnau: Gnau, tmp_path: Path
) -> None:
    with served(tmp_path / "data") as service:
        target = ("--target", service.target)
        played = gnau_process("play", "--rounds", "1", *target, "--token", service.token)
        assert played.returncode == 0, played.stderr
        (round_id,) = re.findall(r"\br-[0-9a-f]+\b", played.stdout)
        pin = tmp_path / "pinned.txt"
        assert gnau("audit", "checkpoint", "--out", str(pin), *target).status == 0
        again = gnau_process("play", "--rounds", "1", *target, "--token", service.token)
        assert again.returncode == 0, again.stderr  # the log grows past the pin
        receipt = tmp_path / "r.json"
        assert gnau("receipt", "get", round_id, "--out", str(receipt), *target).status == 0
        check = ("receipt", "verify", str(receipt), "--key", service.vkey, "--checkpoint", str(pin))

        lacking = gnau(*check)
        assert lacking.status == 2, lacking.out + lacking.err
        assert f"round {round_id}: CANNOT CHECK step consistency" in lacking.out
        assert "INVALID" not in lacking.out
        assert f"gnau receipt get {round_id} --pin {pin}" in lacking.err
        assert "--target" in lacking.err

        fetched = gnau(*check, *target)
        assert fetched.status == 0, fetched.out + fetched.err
        assert f"fetched the receipt again from {service.target}" in fetched.out
        assert re.search(r"VALID .*one history with the pinned checkpoint of size \d", fetched.out)

        pinned = tmp_path / "pinned-r.json"
        got = gnau("receipt", "get", round_id, "--pin", str(pin), "--out", str(pinned), *target)
        assert got.status == 0, got.err
        assert gnau("receipt", "verify", str(pinned), "--key", service.vkey,
                    "--checkpoint", str(pin)).status == 0  # fmt: skip
