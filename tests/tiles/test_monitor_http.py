"""``gnau audit monitor``, ``gnau audit verify --tiles`` and ``gnau receipt verify --tiles``
against a real service's HTTP port (``/log/``), and against a directory copy of its tiles."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from gnau.v1 import dealer_pb2

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.note import SignedNote
from gnau_service.tiles.client import open_tiles
from gnau_service.tiles.monitor import Monitor
from tests.conftest import Run
from tests.web.conftest import WebService

from .tile_files import copy_from_http, leaf, tile_name

pytestmark = pytest.mark.asyncio(loop_scope="module")
Gnau = Callable[..., Run]


def tiles_url(service: WebService) -> str:
    return f"{service.base_url}log/"


async def served_size(service: WebService, at_least: int = 1) -> int:
    """The size of the served checkpoint, once it covers ``at_least`` entries."""
    client = open_tiles(tiles_url(service))
    for _ in range(200):
        note = await asyncio.to_thread(client.checkpoint)
        size = Checkpoint.parse(SignedNote.parse(note.decode()).text).size
        if size >= at_least:
            return size
        await asyncio.sleep(0.05)
    raise AssertionError(f"no checkpoint of {at_least} entries")


async def test_the_monitor_follows_the_http_port_and_waits_for_a_round(
    web_service: WebService,
) -> None:
    await web_service.play()
    size = await served_size(web_service)
    following = Monitor(open_tiles(tiles_url(web_service)), [web_service.app.store.signer.verifier])
    result = await asyncio.to_thread(following.step)
    assert (result.size, result.verified, result.waiting) == (size, size, 0)
    assert result.rounds_replayed >= 1
    replayed = result.rounds_replayed
    # A round dealt, not revealed: its bundle answers 403; the checkpoint still advances.
    round_id = await web_service.play(until="Deal")
    grown = await served_size(web_service, size + 2)
    result = await asyncio.to_thread(following.step)
    assert result.size == grown
    assert result.verified < grown
    assert result.waiting == 1
    assert result.rounds_replayed == replayed
    # Revealed and settled: the bundle is public and the round replayed.
    for method, request in (
        ("Reveal", dealer_pb2.RevealRequest(request_id=f"r-{round_id}", round_id=round_id)),
        ("Settle", dealer_pb2.SettleRequest(request_id=f"s-{round_id}", round_id=round_id)),
    ):
        await web_service.call(method, request)
    final = await served_size(web_service, grown + 2)
    result = await asyncio.to_thread(following.step)
    assert (result.size, result.verified, result.waiting) == (final, final, 0)
    assert result.rounds_replayed == replayed + 1


async def test_a_directory_copy_verifies_and_audit_verify_reads_both(
    web_service: WebService, tmp_path: Path, gnau: Gnau
) -> None:
    await web_service.play()
    size = await served_size(web_service)
    directory = tmp_path / "copy"
    withheld = await asyncio.to_thread(copy_from_http, tiles_url(web_service), directory, size)
    assert withheld == 0
    vkey = web_service.vkey
    for location in (str(directory), tiles_url(web_service)):
        run = await asyncio.to_thread(gnau, "audit", "verify", "--tiles", location, "--key", vkey)
        assert run.status == 0, run.out + run.err
        assert f"entries: {size:,} of {size:,} verified" in run.out
    monitor_run = await asyncio.to_thread(
        gnau, "audit", "monitor", str(directory), "--key", vkey, "--once"
    )
    assert monitor_run.status == 0, monitor_run.err
    assert monitor_run.err.startswith(f"checkpoint {size:,}: {size:,} entries verified")
    # An entry edited in the copy: audit verify and the monitor both refuse it.
    bundle = directory / tile_name("entries", 0, size % 256 or 256)
    data = bytearray(bundle.read_bytes())
    data[40] ^= 0x01
    bundle.write_bytes(bytes(data))
    run = await asyncio.to_thread(gnau, "audit", "verify", str(directory), "--key", vkey)
    assert run.status == 1
    assert "entry 0: its bytes in tile/entries/000" in run.out


async def test_a_receipt_verifies_against_the_tiles(
    web_service: WebService, tmp_path: Path, gnau: Gnau
) -> None:
    round_id = await web_service.play()
    answer = await web_service.call(
        "GetRoundReceipt", dealer_pb2.GetRoundReceiptRequest(round_id=round_id)
    )
    receipt = tmp_path / "receipt.json"
    receipt.write_text(answer.receipt)
    vkey = web_service.vkey
    run = await asyncio.to_thread(
        gnau, "receipt", "verify", str(receipt), "--key", vkey, "--tiles", tiles_url(web_service)
    )
    assert run.status == 0, run.out + run.err
    assert "tiles: the leaf hashes of all 4 entries are the tiles'" in run.out
    # A copy whose level-0 tile lies about one of the round's entries.
    document = json.loads(answer.receipt)
    size = Checkpoint.parse(SignedNote.parse(document["checkpoint"]).text).size
    directory = tmp_path / "copy"
    await asyncio.to_thread(copy_from_http, tiles_url(web_service), directory, size)
    first = document["entries"][0]["index"]
    entry = document["entries"][0]["entry"].encode()
    assert leaf(entry) in (directory / tile_name(0, 0, size % 256 or 256)).read_bytes()
    tile = directory / tile_name(0, 0, size % 256 or 256)
    data = bytearray(tile.read_bytes())
    data[32 * first] ^= 0x01
    tile.write_bytes(bytes(data))
    run = await asyncio.to_thread(
        gnau, "receipt", "verify", str(receipt), "--key", vkey, "--tiles", str(directory)
    )
    assert run.status == 1, run.out + run.err
    assert "tiles: INVALID" in run.out
