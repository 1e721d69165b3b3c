"""End to end, with real processes: ``gnau serve`` asking two ``gnau witness serve`` processes to
cosign (quorum 2); rounds played over gRPC; a round's receipt, fetched with ``gnau receipt get``,
verifies with ``--quorum 2`` in ``gnau receipt verify`` and in the browser page (issue 13's
"done when")."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from gnau_client import GnauClient, Witness
from gnau_client.cosignatures import cosigners
from playwright.async_api import Page

from tests.server.witnessed import log_vkey
from tests.serving import free_port, gnau, served
from tests.web.conftest import SEATS
from tests.web.test_page import verdict
from tests.witnessing import witness_process, write_logs_toml

# make test-system: chromium, witnesses and `gnau serve` processes.
pytestmark = [pytest.mark.system, pytest.mark.asyncio(loop_scope="module")]

ORIGIN = "gnau-dealer/e2e-witnessed"
COSIGNED_TIMEOUT = 30.0


def cosigned_receipt(client: GnauClient, round_id: str, witnesses: list[Witness]) -> str:
    """The round's receipt once both witnesses have cosigned a checkpoint that covers it."""
    deadline = time.monotonic() + COSIGNED_TIMEOUT
    while True:
        receipt = client.get_round_receipt(round_id)
        if len(cosigners(json.loads(receipt)["checkpoint"], witnesses)) == len(witnesses):
            return receipt
        assert time.monotonic() < deadline, "the witnesses did not cosign the round in time"
        time.sleep(0.1)


async def test_a_receipt_from_a_service_with_two_witnesses_verifies_with_quorum_2(
    page: Page, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    logs = write_logs_toml(tmp_path / "logs.toml", {ORIGIN: [log_vkey(data_dir, ORIGIN)]})
    http_port = free_port()
    with (
        witness_process(tmp_path / "w1", logs, name="witness.e2e/w1") as w1,
        witness_process(tmp_path / "w2", logs, name="witness.e2e/w2") as w2,
    ):
        flags = [arg for w in (w1, w2) for arg in ("--witness", f"{w.url}={w.vkey}")]
        with served(
            data_dir,
            "--origin", ORIGIN, *flags, "--witness-quorum", "2", "--witness-interval-ms", "50",
            "--http-listen", f"127.0.0.1:{http_port}",
        ) as server:  # fmt: skip
            witnesses = [Witness.from_vkey(w.vkey) for w in (w1, w2)]
            with GnauClient(server.target, token=server.token) as client:
                # At starter tables, which a first start catalogues (issue 38).
                rounds = [client.play_round(f"table-{n}", SEATS).round_id for n in (1, 2, 3)]
                receipt = await asyncio.to_thread(cosigned_receipt, client, rounds[-1], witnesses)
                checkpoint = await asyncio.to_thread(
                    client.get_checkpoint, witnesses=[w1.vkey, w2.vkey], quorum=2
                )
            assert len(cosigners(checkpoint, witnesses)) == 2

            fetched = gnau(
                "receipt", "get", rounds[-1], "--target", server.target, "--out",
                str(tmp_path / "receipt.json"),
            )  # fmt: skip
            assert fetched.returncode == 0, fetched.stderr
            path = tmp_path / "receipt.json"
            # Served against the newest checkpoint both witnesses cosigned, as the one before.
            assert len(cosigners(json.loads(path.read_text())["checkpoint"], witnesses)) == 2
            assert json.loads(path.read_text())["entries"] == json.loads(receipt)["entries"]
            verified = gnau(
                "receipt", "verify", str(path), "--key", server.vkey, "--witness", w1.vkey,
                "--witness", w2.vkey, "--quorum", "2",
            )  # fmt: skip
            assert verified.returncode == 0, verified.stdout + verified.stderr
            assert "VALID (settled)" in verified.stdout
            assert "cosigned by 2 witnesses (witness.e2e/w1, witness.e2e/w2)" in verified.stdout

            await page.goto(f"http://127.0.0.1:{http_port}/")
            await page.wait_for_selector("body[data-ready=true]")
            await page.fill("#vkey", server.vkey)
            await page.fill("#witness-keys", f"{w1.vkey}\n{w2.vkey}")
            await page.fill("#quorum", "2")
            await page.fill("#round-id", rounds[-1])
            await page.click("#fetch-receipt")
            state, step, text = await verdict(page)
            assert (state, step) == ("valid", ""), text
            assert "2 of your witnesses cosigned that tree" in text
