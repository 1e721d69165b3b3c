"""The page checks a receipt's inclusion against the log's tiles beside it (docs/web.md): a
line of its own under the steps, green on a live service; red when a tile it reads is altered
(Playwright answers the tile request with changed bytes), while the receipt's own verdict stays
what its proofs say; amber when the tiles are not there (404) or the page is a file."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Page, Route, expect

from tests.schemas.example_receipts import EXAMPLE_VKEY, V2_RECEIPT
from tests.web.conftest import WebService
from tests.web.test_page import open_page, verdict

# make test-system: chromium, driven through Playwright.
pytestmark = [pytest.mark.system, pytest.mark.asyncio(loop_scope="module")]

CHECK = "inclusion checked against the log's tiles"


async def verify_by_id(page: Page, service: WebService, round_id: str) -> tuple[str, str]:
    """Fetches and verifies the round's receipt; the verdict's state, and the tiles line once
    it is done: its state and text."""
    await page.fill("#vkey", service.vkey)
    await page.fill("#round-id", round_id)
    await page.click("#fetch-receipt")
    state, _, text = await verdict(page)
    assert state == "valid", text
    line = page.locator("#tiles-check")
    await expect(line).to_have_attribute("data-state", re.compile("^(passed|failed|unavailable)$"))
    return await line.get_attribute("data-state") or "", await line.text_content() or ""


async def test_the_receipt_checks_against_the_logs_tiles(
    page: Page, web_service: WebService
) -> None:
    round_id = await web_service.play()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    await open_page(page, web_service)
    state, text = await verify_by_id(page, web_service, round_id)
    assert state == "passed", text
    assert text.startswith(f"✓ {CHECK}") and "the receipt's 4 entries" in text
    assert any("/log/tile/0/000.p/" in url for url in requested), requested
    assert await page.locator("#tiles-check").is_visible()


async def altered(route: Route) -> None:
    """The real tile, one bit of its last hash flipped."""
    response = await route.fetch()
    body = bytearray(await response.body())
    body[-1] ^= 1
    await route.fulfill(response=response, body=bytes(body))


async def test_an_altered_tile_fails_the_check(page: Page, web_service: WebService) -> None:
    round_id = await web_service.play()
    await open_page(page, web_service)
    await page.route("**/log/tile/0/**", altered)
    state, text = await verify_by_id(page, web_service, round_id)
    assert state == "failed", text
    assert f"✗ {CHECK}: FAILS" in text
    # Its last hash is the receipt's last entry (the tree ends with the round) or, if the log
    # went on, the root's: either way the tiles disagree with what was signed.
    assert "leaf hash" in text or "the root" in text
    # The receipt's own proofs still hold: the verdict is theirs, the tiles line is apart.
    await expect(page.locator("#verdict")).to_have_attribute("data-state", "valid")


async def test_a_short_tile_fails_the_check(page: Page, web_service: WebService) -> None:
    round_id = await web_service.play()
    await open_page(page, web_service)

    async def short(route: Route) -> None:
        response = await route.fetch()
        await route.fulfill(response=response, body=(await response.body())[:-32])

    await page.route("**/log/tile/0/**", short)
    state, text = await verify_by_id(page, web_service, round_id)
    assert state == "failed" and "bytes, not" in text, text


async def test_missing_tiles_are_said_plainly(page: Page, web_service: WebService) -> None:
    round_id = await web_service.play()
    await open_page(page, web_service)
    await page.route(
        "**/log/tile/**",
        lambda route: route.fulfill(status=404, content_type="application/json", body="{}"),
    )
    state, text = await verify_by_id(page, web_service, round_id)
    assert state == "unavailable", text
    assert f"? {CHECK}: not checked" in text and "404" in text
    await page.unroute("**/log/tile/**")
    await page.route(
        "**/log/checkpoint",
        lambda route: route.fulfill(status=404, content_type="application/json", body="{}"),
    )
    state, text = await verify_by_id(page, web_service, round_id)
    assert state == "unavailable" and "log/checkpoint: 404" in text, text


async def test_a_pasted_receipt_of_another_log_is_not_checked_here(
    page: Page, web_service: WebService
) -> None:
    """The docs' example receipt (the log gnau-dealer/example): this service's tiles are of
    another log, which the line says instead of failing."""
    await open_page(page, web_service)
    await page.fill("#vkey", EXAMPLE_VKEY)
    await page.fill("#receipt-text", V2_RECEIPT.read_text(encoding="utf-8"))
    await page.click("#verify-pasted")
    state, _, text = await verdict(page)
    assert state == "valid", text
    line = page.locator("#tiles-check")
    await expect(line).to_have_attribute("data-state", "unavailable")
    await expect(line).to_contain_text("of the log gnau-dealer/local, the receipt's of")
