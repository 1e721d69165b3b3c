"""The verifier page with witness keys and a quorum, in Debian's chromium: a service asks three
witnesses, of which one answers; its receipt verifies with a quorum of 1 of them and is refused,
at the checkpoint step as ``gnau receipt verify`` refuses it, with a quorum of 2."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest
import pytest_asyncio
from playwright.async_api import Page

from gnau_service.server.process.app import running
from tests.server.witnessed import WitnessSpec, down_witness, local_witness, log_vkey, until
from tests.web.conftest import WebService, web_settings
from tests.web.test_page import open_page, verdict

# make test-system: chromium, driven through Playwright.
pytestmark = [pytest.mark.system, pytest.mark.asyncio(loop_scope="module")]

ORIGIN = "gnau-dealer/witnessed-web"


@dataclass
class WitnessedWeb:
    service: WebService
    witnesses: list[WitnessSpec]  # the first one is up

    async def cosigned_round(self) -> str:
        """A round played, and its receipt's checkpoint cosigned by the witness that is up."""
        round_id = await self.service.play()
        witnessing = self.service.app.witnessing
        assert witnessing is not None
        size = self.service.app.tail.size
        up = witnessing.statuses[0]
        await until(lambda: up.cosigned_size >= size)
        return round_id


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def witnessed_web(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[WitnessedWeb]:
    directory = tmp_path_factory.mktemp("web-witnessed")
    data_dir = directory / "data"
    log_key = log_vkey(data_dir, ORIGIN)
    async with local_witness(directory / "w1", "witness.test/w1", ORIGIN, log_key) as up:
        witnesses = [up, down_witness("witness.test/w2"), down_witness("witness.test/w3")]
        settings = web_settings(
            directory,
            origin=ORIGIN,
            witnesses=tuple(spec.flag for spec in witnesses),
            witness_interval_ms=20,
        )
        async with (
            running(settings) as app,
            grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            yield WitnessedWeb(WebService(app, channel), witnesses)


async def verify_with_quorum(
    page: Page, witnessed: WitnessedWeb, round_id: str, quorum: str
) -> tuple[str, str, str]:
    service = witnessed.service
    await open_page(page, service)
    await page.fill("#vkey", service.vkey)
    await page.fill("#witness-keys", "\n".join(spec.vkey for spec in witnessed.witnesses))
    await page.fill("#quorum", quorum)
    await page.fill("#round-id", round_id)
    await page.click("#fetch-receipt")
    return await verdict(page)


async def test_a_quorum_of_two_of_three_refuses_a_checkpoint_one_witness_cosigned(
    page: Page, witnessed_web: WitnessedWeb
) -> None:
    round_id = await witnessed_web.cosigned_round()
    state, step, text = await verify_with_quorum(page, witnessed_web, round_id, "2")
    assert (state, step) == ("invalid", "checkpoint"), text
    assert "1 valid cosignatures from trusted witnesses (witness.test/w1)" in text
    assert "fewer than the quorum of 2" in text

    state, step, text = await verify_with_quorum(page, witnessed_web, round_id, "1")
    assert (state, step) == ("valid", ""), text
    assert "1 of your witnesses cosigned that tree (witness.test/w1)" in text


async def test_an_unusable_quorum_or_witness_key_is_said_plainly(
    page: Page, witnessed_web: WitnessedWeb
) -> None:
    round_id = await witnessed_web.cosigned_round()
    state, _, text = await verify_with_quorum(page, witnessed_web, round_id, "4")
    assert state == "unreadable", text
    assert "the quorum must be a whole number from 0 to the 3 witness keys" in text
    await page.fill("#witness-keys", "witness.test/w1+00000000+not-a-key")
    await page.fill("#quorum", "")
    await page.click("#verify-pasted")
    state, _, text = await verdict(page)
    assert state == "unreadable", text
    assert "a witness key cannot be used" in text
