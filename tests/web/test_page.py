"""The verifier page in Debian's chromium: served receipts and the fairness vectors verify
(green); tampered receipts fail (red) at the step ``gnau receipt verify`` names; game recall;
keyboard-only use; a phone-sized screen."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Page, expect

from gnau_service.audit.note import Verifier
from gnau_service.audit.receipts import Receipt, verify_receipt
from tests.schemas.example_receipts import (
    EXAMPLE_VKEY,
    V1_RECEIPT,
    V2_RECEIPT,
    V2_TAMPERINGS,
    reference_step,
    tampered_v2,
)
from tests.serving import REPO
from tests.web.conftest import PHONE, WebService

# make test-system: chromium, driven through Playwright.
pytestmark = [pytest.mark.system, pytest.mark.asyncio(loop_scope="module")]

SCREENSHOT = "web-verified-round.png"
#: The tables these tests play at besides the starter table-1, catalogued for the default
#: operator (issue 38: a round is dealt only at a catalogued table).
TABLES = ("recall-table", "recall-other", "recall-off")


#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = TABLES


async def open_page(page: Page, service: WebService, fragment: str = "") -> None:
    await page.goto(service.base_url + fragment)
    await expect(page.locator("body")).to_have_attribute("data-ready", "true")


async def verdict(page: Page) -> tuple[str, str, str]:
    """The verdict once checking is done: its state, the step it names, its text."""
    box = page.locator("#verdict")
    done = re.compile("^(valid|invalid|unchecked|unreadable)$")
    await expect(box).to_have_attribute("data-state", done)
    return (
        await box.get_attribute("data-state") or "",
        await box.get_attribute("data-step") or "",
        # Every word, the finding under its closed detail too.
        await box.text_content() or "",
    )


async def verify_pasted(page: Page, text: str, vkey: str = "") -> tuple[str, str, str]:
    await page.fill("#vkey", vkey)
    await page.fill("#receipt-text", text)
    await page.click("#verify-pasted")
    return await verdict(page)


async def receipt_of(service: WebService, round_id: str) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{service.base_url}rounds/{round_id}/receipt") as response,
    ):
        assert response.status == 200
        parsed: dict[str, Any] = json.loads(await response.text())
        return parsed


async def cli_step(receipt: dict[str, Any], vkey: str, path: Path) -> str:
    """What ``gnau receipt verify`` says of the receipt: the step it fails at (or VALID)."""
    path.write_text(json.dumps(receipt, indent=2), encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gnau_service.cli.main", "receipt", "verify", str(path),
        "--key", vkey, stdout=asyncio.subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    stdout, _ = await process.communicate()
    line = stdout.decode()
    found = re.search(r"INVALID at step (\w+): (.*)", line)
    assert process.returncode == (1 if found else 0), line
    return f"{found.group(1)}: {found.group(2)}" if found else "VALID"


async def test_a_round_played_through_the_api_verifies_by_its_id(
    page: Page, web_service: WebService, tmp_path: Path
) -> None:
    round_id = await web_service.play()
    await open_page(page, web_service)
    await page.fill("#vkey", web_service.vkey)
    await page.fill("#round-id", round_id)
    await page.click("#fetch-receipt")
    state, step, text = await verdict(page)
    assert (state, step) == ("valid", ""), text
    assert f"VALID: round {round_id}, settled" in text
    assert "fairness, entries, round, outcome, checkpoint, inclusion" in text
    steps = page.locator("#steps li[data-state=passed]")
    await expect(steps).to_have_count(6)
    # The round itself: the dealer's hand and the three seats, each with stake, outcome, delta.
    await expect(page.locator("#round article.hand")).to_have_count(4)
    await expect(page.locator("#round .card")).to_have_count(20)
    # A v2 round shows each seat's player reference, never the id the platform sent ("bob").
    await expect(page.locator("#round article", has_text="Seat 2: p-")).to_contain_text("stake 250")
    await expect(page.locator("#round .outcome")).to_have_count(3)
    await expect(page.locator("#round .card.ox")).to_have_count(await ox_cards_expected(page))
    # The return to player the round's commitment disclosed (the default rules' PAR sheet).
    await expect(page.locator("#round")).to_contain_text(
        "0.948173 per unit staked (house edge 0.051827)"
    )
    shot = await page.screenshot(full_page=True)
    (tmp_path / SCREENSHOT).write_bytes(shot)
    assert shot.startswith(b"\x89PNG")
    if target := os.environ.get("GNAU_WEB_SCREENSHOT_DIR"):  # how docs/ got its picture
        await page.set_viewport_size({"width": 900, "height": 900})
        top, bottom = await page.evaluate(
            """['verdict-heading', 'round-section']
                .map((id) => document.getElementById(id).getBoundingClientRect())
                .map((box, k) => (k ? box.bottom : box.top) + scrollY)"""
        )
        clip = {"x": 0, "y": top - 8, "width": 900, "height": bottom - top + 16}
        (Path(target) / SCREENSHOT).write_bytes(await page.screenshot(full_page=True, clip=clip))


async def ox_cards_expected(page: Page) -> int:
    """Three ox cards for every hand the page names as having an ox (the category text)."""
    categories = await page.locator("#round .category").all_inner_texts()
    return 3 * sum(1 for category in categories if category != "No Ox")


async def test_the_hash_opens_a_round_with_the_remembered_key(
    page: Page, web_service: WebService
) -> None:
    round_id = await web_service.play()
    await open_page(page, web_service)
    await page.fill("#vkey", web_service.vkey)
    await page.dispatch_event("#vkey", "change")  # remembered on this device
    await open_page(page, web_service, f"#{round_id}")
    state, _, text = await verdict(page)
    assert state == "valid", text
    await expect(page.locator("#round-id")).to_have_value(round_id)


#: Every fairness vector, v1 and v2, but the 82-seat one (a page of 83 hands: slow to draw).
VECTOR_NAMES = sorted(
    path.name
    for path in (REPO / "docs" / "vectors").glob("fairness-round-*.json")
    if "82seats" not in path.name
)


@pytest.mark.parametrize("vector", range(len(VECTOR_NAMES)), ids=VECTOR_NAMES)
async def test_the_fairness_vectors_verify(
    page: Page, web_service: WebService, vectors: list[Path], vector: int
) -> None:
    await open_page(page, web_service)
    path = next(path for path in vectors if path.name == VECTOR_NAMES[vector])
    if vector == 0:
        await page.set_input_files("#receipt-file", str(path))  # a file, as if dropped
        state, _, text = await verdict(page)
    else:
        document = json.loads(path.read_text(encoding="utf-8"))["revealed_round"]
        state, _, text = await verify_pasted(page, json.dumps(document))
    assert state == "valid", text
    assert "dealt fairly" in text
    seats = len(json.loads(path.read_text(encoding="utf-8"))["revealed_round"]["seats"])
    await expect(page.locator("#round article.hand")).to_have_count(seats + 1)


async def test_a_tampered_revealed_round_names_its_link(
    page: Page, web_service: WebService, vectors: list[Path]
) -> None:
    document = json.loads(vectors[1].read_text(encoding="utf-8"))["revealed_round"]
    document["seats"][3]["stake"] += 1
    await open_page(page, web_service)
    state, step, text = await verify_pasted(page, json.dumps(document))
    assert (state, step) == ("invalid", "fairness"), text
    assert "INVALID at step fairness" in text
    assert "lock: the seats and beacon hash to" in text
    # Plain words first; the hashes only under the detail.
    shown = await page.locator("#verdict").inner_text()
    assert "The stakes or seats were changed after the cards were shuffled." in shown
    assert "hash to" not in shown
    await page.locator("#verdict summary").click()
    assert "lock: the seats and beacon hash to" in await page.locator("#verdict").inner_text()


def _flip_hex(text: str, at: int) -> str:
    return text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1 :]


def _tamper_card(receipt: dict[str, Any]) -> None:
    hand = receipt["round"]["hands"][0]["cards"]
    hand[0] = next(card for card in receipt["round"]["deck"][::-1] if card not in hand)


def _tamper_stake(receipt: dict[str, Any]) -> None:
    receipt["round"]["seats"][1]["stake"] += 1


def _tamper_client_seed(receipt: dict[str, Any]) -> None:
    seat = receipt["round"]["seats"][1]
    seat["client_seed"] = "fe" if seat["client_seed"] == "ff" else "ff"


def _tamper_seed(receipt: dict[str, Any]) -> None:
    receipt["round"]["server_seed"] = _flip_hex(receipt["round"]["server_seed"], 10)


def _tamper_signature(receipt: dict[str, Any]) -> None:
    entry = receipt["entries"][1]
    signature = entry["entry"].index('"signature":"') + len('"signature":"')
    entry["entry"] = _flip_hex(entry["entry"], signature + 40)


def _tamper_proof_hash(receipt: dict[str, Any]) -> None:
    proof = receipt["entries"][0]["inclusion_proof"]
    proof[0] = _flip_hex(proof[0], 5)


def _tamper_checkpoint_line(receipt: dict[str, Any]) -> None:
    origin, size, *rest = receipt["checkpoint"].split("\n")
    receipt["checkpoint"] = "\n".join([origin, str(int(size) + 1), *rest])


TAMPERINGS: dict[str, tuple[Callable[[dict[str, Any]], None], str, str]] = {
    # what is changed: (how, the step that must fail, what its reason must name)
    "a card": (_tamper_card, "fairness", "hand of seat 1:"),
    # The live round is v3: its lock hashes no stake, the signed ROUND_DEALT entry binds it.
    "a stake": (_tamper_stake, "round", "seats differs from what the log published"),
    "a client seed": (_tamper_client_seed, "fairness", "lock:"),
    "the seed": (_tamper_seed, "fairness", "commitment:"),
    "a signature": (_tamper_signature, "entries", "the signature does not verify"),
    "a proof hash": (_tamper_proof_hash, "inclusion", "is not in the checkpoint's tree"),
    "a checkpoint line": (_tamper_checkpoint_line, "checkpoint", "does not verify"),
}


async def test_tampered_receipts_fail_at_the_step_the_command_line_names(
    page: Page, web_service: WebService, tmp_path: Path
) -> None:
    round_id = await web_service.play()
    original = await receipt_of(web_service, round_id)
    tampered = {}
    for name, (tamper, _, _) in TAMPERINGS.items():
        receipt = json.loads(json.dumps(original))
        tamper(receipt)
        tampered[name] = receipt
    # What the reference says of each: gnau receipt verify's own verify_receipt, and the command
    # itself for two of them (each run is a Python start-up of a few seconds on this machine).
    keys = [Verifier.from_vkey(web_service.vkey)]
    reference = {
        name: verify_receipt(Receipt.from_json(receipt), keys).failure
        for name, receipt in tampered.items()
    }
    untouched, checkpoint_line = await asyncio.gather(
        cli_step(original, web_service.vkey, tmp_path / "untouched.json"),
        cli_step(tampered["a checkpoint line"], web_service.vkey, tmp_path / "tampered.json"),
    )
    assert untouched == "VALID"
    assert checkpoint_line == str(reference["a checkpoint line"])
    await open_page(page, web_service)
    state, _, text = await verify_pasted(page, json.dumps(original), web_service.vkey)
    assert state == "valid", text
    for name, (_, step, reason) in TAMPERINGS.items():
        says = reference[name]
        assert says is not None and says.step == step, (name, says)
        assert reason in says.reason, (name, says)
        state, page_step, text = await verify_pasted(
            page, json.dumps(tampered[name]), web_service.vkey
        )
        assert (state, page_step) == ("invalid", step), (name, text)
        assert f"INVALID at step {step}" in text, (name, text)
        assert reason in text, (name, text)
        await expect(page.locator(f"#steps li[data-step={step}]")).to_have_attribute(
            "data-state", "failed"
        )


async def test_recall_lists_the_tables_rounds_and_opens_one(
    page: Page, listing_web_service: WebService
) -> None:
    web_service = listing_web_service  # the public may list rounds here
    settled = await web_service.play("recall-table")
    revealed = await web_service.play("recall-table", until="Reveal")
    secret = await web_service.play("recall-other", until="Deal")  # its seed is not public
    await open_page(page, web_service)
    items = page.locator("#recall-list button")
    # On opening, every table's newest rounds: the dealt one does not exist to the public yet.
    await expect(items.first).to_have_attribute("data-round-id", revealed)
    every_table = [await item.get_attribute("data-round-id") for item in await items.all()]
    assert secret not in every_table
    await page.fill("#vkey", web_service.vkey)
    await page.fill("#table-id", "recall-table")
    await page.click("#list-rounds")
    await expect(items).to_have_count(2)
    listed = [await item.get_attribute("data-round-id") for item in await items.all()]
    assert listed == [revealed, settled]  # newest first
    await items.nth(1).click()
    state, _, text = await verdict(page)
    assert state == "valid", text
    assert f"round {settled}, settled" in text
    await expect(page.locator("#round-id")).to_have_value(settled)
    await items.nth(0).click()
    # The verdict box still shows the first round's "valid" until the second is checked: wait
    # for the second's words first, then for its state (set as its check ends).
    await expect(page.locator("#verdict")).to_contain_text(f"round {revealed}, revealed")
    state, _, text = await verdict(page)
    assert state == "valid", text
    assert f"round {revealed}, revealed" in text


async def test_recall_says_plainly_when_listing_is_off(page: Page, web_service: WebService) -> None:
    round_id = await web_service.play("recall-off")
    await open_page(page, web_service)
    status = page.locator("#recall-status")
    # On opening, the listing the service refuses (its default) is said, not shown as a fault.
    await expect(status).to_contain_text("Listing rounds is off on this service")
    await expect(status).to_contain_text("round id")
    await expect(page.locator("#recall-list button")).to_have_count(0)
    await expect(page.locator("#recall-more")).to_be_hidden()
    await page.fill("#table-id", "recall-off")
    await page.click("#list-rounds")
    await expect(status).to_contain_text("Listing rounds is off on this service")
    assert "Cannot list rounds" not in await status.inner_text()
    # The round id, as the platform hands it to its players, still opens the round.
    await page.fill("#vkey", web_service.vkey)
    await page.fill("#round-id", round_id)
    await page.click("#fetch-receipt")
    state, _, text = await verdict(page)
    assert state == "valid", text
    assert f"round {round_id}, settled" in text


async def test_an_unknown_round_and_a_missing_key_are_said_plainly(
    page: Page, web_service: WebService
) -> None:
    await open_page(page, web_service)
    await page.fill("#round-id", "r-no-such-round")
    await page.click("#fetch-receipt")
    state, _, text = await verdict(page)
    assert state == "unreadable"
    assert "r-no-such-round: there is no round with this id" in text
    round_id = await web_service.play()
    await page.fill("#round-id", round_id)
    await page.click("#fetch-receipt")
    state, _, text = await verdict(page)
    assert state == "unreadable"
    assert "enter the pinned key" in text


async def test_the_servers_key_comes_with_a_warning(page: Page, web_service: WebService) -> None:
    await open_page(page, web_service)
    await expect(page.locator("#key-warning")).to_be_hidden()
    await page.click("#fetch-key")
    await expect(page.locator("#vkey")).to_have_value(web_service.vkey)
    await expect(page.locator("#key-warning")).to_be_visible()
    await expect(page.locator("#key-warning")).to_contain_text("proves nothing")


async def test_keyboard_alone_reaches_every_control_and_verifies(
    page: Page, web_service: WebService
) -> None:
    round_id = await web_service.play()
    await open_page(page, web_service)
    reached: list[str] = []
    for _ in range(30):
        await page.keyboard.press("Tab")
        focused = await page.evaluate("document.activeElement.id || document.activeElement.tagName")
        reached.append(focused)
    controls = [
        "round-id", "fetch-receipt", "receipt-text", "verify-pasted", "receipt-file", "vkey",
        "fetch-key", "pinned-checkpoint", "witness-keys", "quorum", "table-id", "list-rounds",
    ]  # fmt: skip
    positions = [reached.index(control) for control in controls]
    assert positions == sorted(positions), reached  # in reading order
    # Keyboard only, from a fresh load: the key, then the round id, then Enter.
    await open_page(page, web_service)
    await page.keyboard.press("Tab")  # the skip link comes first
    assert await page.evaluate("document.activeElement.className") == "skip-link"
    while await page.evaluate("document.activeElement.id") != "vkey":
        await page.keyboard.press("Tab")
    await page.keyboard.type(web_service.vkey)
    while await page.evaluate("document.activeElement.id") != "round-id":
        await page.keyboard.press("Shift+Tab")
    await page.keyboard.type(round_id)
    await page.keyboard.press("Enter")
    state, _, text = await verdict(page)
    assert state == "valid", text
    assert await page.evaluate("document.activeElement.id") == "verdict"  # focus moves to it


async def test_a_phone_sized_screen_needs_no_sideways_scrolling(
    page: Page, web_service: WebService
) -> None:
    round_id = await web_service.play()
    await page.set_viewport_size(PHONE)
    await open_page(page, web_service)
    await page.fill("#vkey", web_service.vkey)
    await page.fill("#round-id", round_id)
    await page.click("#fetch-receipt")
    state, _, _ = await verdict(page)
    assert state == "valid"
    await page.click("#round details summary")  # the long hashes too
    widths = await page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1] == PHONE["width"], widths
    overflowing = await page.evaluate(
        """[...document.querySelectorAll('body *')]
            .filter((e) => e.getBoundingClientRect().right > innerWidth + 1)
            .map((e) => e.id || e.className || e.tagName)"""
    )
    assert overflowing == [], overflowing


async def test_a_pinned_checkpoint_must_be_one_history_with_the_receipts(
    page: Page, web_service: WebService
) -> None:
    earlier = (await receipt_of(web_service, await web_service.play()))["checkpoint"]
    round_id = await web_service.play()
    await open_page(page, web_service)
    await page.fill("#vkey", web_service.vkey)
    await page.fill("#pinned-checkpoint", earlier)
    await page.fill("#round-id", round_id)
    await page.click("#fetch-receipt")  # asks for the proof from the pin's size
    state, _, text = await verdict(page)
    assert state == "valid", text
    size = int(earlier.split("\n")[1])
    assert f"one history with your pinned checkpoint of {size} entries" in text
    await expect(page.locator("#steps li[data-state=passed]")).to_have_count(7)
    # The same receipt against a pin the log never signed: a fork or a forgery, named.
    origin, _, root, *rest = earlier.split("\n")
    await page.fill("#pinned-checkpoint", "\n".join([origin, str(size + 1000), root, *rest]))
    await page.click("#verify-pasted")
    state, step, text = await verdict(page)
    assert (state, step) == ("invalid", "consistency"), text
    assert "the pinned checkpoint does not open" in text


async def test_a_receipt_without_the_pins_proof_is_amber_not_red(
    page: Page, web_service: WebService
) -> None:
    earlier = (await receipt_of(web_service, await web_service.play()))["checkpoint"]
    plain = await receipt_of(web_service, await web_service.play())  # fetched without a pin
    await open_page(page, web_service)
    await page.fill("#vkey", web_service.vkey)
    await page.fill("#pinned-checkpoint", earlier)
    await page.fill("#receipt-text", json.dumps(plain))
    await page.click("#verify-pasted")
    state, step, text = await verdict(page)
    assert (state, step) == ("unchecked", "consistency"), text
    assert "CANNOT CHECK" in text and "nothing is known to be wrong" in text
    assert "INVALID" not in text and "--pin" in text
    await expect(page.locator("#steps li[data-state=unchecked]")).to_have_count(1)
    await expect(page.locator("#steps li[data-state=failed]")).to_have_count(0)


async def test_a_v2_receipt_shows_references_and_a_player_finds_their_seat(
    page: Page, web_service: WebService
) -> None:
    receipt = json.loads(V2_RECEIPT.read_text(encoding="utf-8"))
    seats = receipt["round"]["seats"]
    await open_page(page, web_service)
    state, _, text = await verify_pasted(page, json.dumps(receipt), EXAMPLE_VKEY)
    assert state == "valid", text
    for seat in seats:
        article = page.locator(f"#round article.hand[data-seat-number='{seat['seat_number']}']")
        await expect(article.locator("h3")).to_have_text(
            f"Seat {seat['seat_number']}: {seat['player_ref']}"
        )
    await expect(page.locator("#round")).to_contain_text("player references (fairness v2)")
    mine = seats[1]
    for query in (
        mine["player_ref"],
        mine["player_ref"].upper().replace("P-", "p-"),
        str(mine["seat_number"]),
    ):
        await page.fill("#seat-query", query)
        await page.click("#find-seat")
        status = page.locator("#seat-status")
        await expect(status).to_have_attribute("data-found", "true")
        await expect(status).to_contain_text(
            f"Seat {mine['seat_number']}, reference {mine['player_ref']}, stake {mine['stake']}"
        )
        await expect(status).to_contain_text("The round verified")
        await expect(page.locator("#round article.hand.yours")).to_have_count(1)
        await expect(
            page.locator(f"#round article.hand.yours[data-seat-number='{mine['seat_number']}']")
        ).to_have_count(1)
    await page.fill("#seat-query", "p-" + "0" * 32)
    await page.press("#seat-query", "Enter")
    await expect(page.locator("#seat-status")).to_have_attribute("data-found", "false")
    await expect(page.locator("#round article.hand.yours")).to_have_count(0)


async def test_a_v1_receipt_still_verifies_and_shows_player_ids(
    page: Page, web_service: WebService
) -> None:
    receipt = json.loads(V1_RECEIPT.read_text(encoding="utf-8"))
    await open_page(page, web_service)
    state, _, text = await verify_pasted(page, json.dumps(receipt), EXAMPLE_VKEY)
    assert state == "valid", text
    seat = receipt["round"]["seats"][0]
    await expect(page.locator("#round article.hand h3").nth(1)).to_have_text(
        f"Seat {seat['seat_number']}: {seat['player_id']}"
    )
    await page.fill("#seat-query", seat["player_id"])
    await page.click("#find-seat")
    await expect(page.locator("#seat-status")).to_contain_text(
        f"Seat {seat['seat_number']}, player {seat['player_id']}"
    )


async def test_tampered_v2_receipts_fail_at_the_step_the_reference_names(
    page: Page, web_service: WebService
) -> None:
    await open_page(page, web_service)
    for name, receipt in tampered_v2().items():
        step = V2_TAMPERINGS[name][1]
        assert reference_step(receipt) == step, name
        state, page_step, text = await verify_pasted(page, json.dumps(receipt), EXAMPLE_VKEY)
        assert (state, page_step) == ("invalid", step), (name, text)


async def test_the_verdict_comes_first(page: Page, web_service: WebService) -> None:
    await open_page(page, web_service)
    verdict = await page.locator("#verdict").bounding_box()
    form = await page.locator("#fetch-form").bounding_box()
    assert verdict is not None and form is not None
    assert verdict["y"] < form["y"] and verdict["y"] < 400, (verdict, form)


async def test_every_link_of_the_page_leads_somewhere_on_it(
    page: Page, web_service: WebService
) -> None:
    await open_page(page, web_service)
    targets = await page.eval_on_selector_all(
        "a[href]", "links => links.map((link) => link.getAttribute('href'))"
    )
    assert "#how-it-works" in targets, targets
    for target in targets:
        assert target.startswith("#"), target  # the page links only within itself
        assert await page.locator(target).count() == 1, target
    await page.click("footer a[href='#how-it-works']")
    await expect(page.locator("#how-it-works li")).to_have_count(7)
