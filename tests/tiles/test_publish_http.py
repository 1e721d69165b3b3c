"""What ``gnau tiles publish`` writes is what a running service's HTTP port serves at ``/log/``:
the same checkpoint, the same bytes for every tile, and the same bundle withheld (403 there,
absent here) while its round is not revealed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from gnau.v1 import dealer_pb2

from gnau_service.audit.entries import EntryKind
from gnau_service.store import PendingEntry, Transaction
from gnau_service.tiles.publisher import publish_once
from gnau_service.tiles.targets import DirectoryTarget, S3Target
from tests.tiles.conftest import Seaweed
from tests.tiles.logs import expected_tiles, files_under
from tests.web.conftest import WebService

pytestmark = pytest.mark.asyncio(loop_scope="module")
CATALOGUED = ("table-1", "table-2")


async def served(service: WebService, path: str) -> tuple[int, bytes]:
    status, _, body = await service.log(path)
    return status, body


async def test_the_published_tiles_are_the_served_ones(
    web_service: WebService, tmp_path: Path
) -> None:
    store = web_service.app.store
    await web_service.play()

    def config(i: int) -> Callable[[Transaction], PendingEntry]:
        return lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"i": i})

    await asyncio.gather(*(store.run_async(config(i)) for i in range(400)))
    await web_service.play()
    round_id = await web_service.play(until="Deal")  # its bundle waits for the reveal
    root = tmp_path / "tiles"
    report = await asyncio.to_thread(publish_once, store, DirectoryTarget(root))
    files = files_under(root)
    status, checkpoint = await served(web_service, "checkpoint")
    assert (status, checkpoint) == (200, files.pop("checkpoint"))
    entries = list(store.iter_entries(0, report.size))
    expected = expected_tiles(entries)
    withheld = {
        path for path in expected if path.startswith("tile/entries/00") and path not in files
    }
    assert withheld == {f"tile/entries/001.p/{report.size - 256}"}
    assert files == {path: data for path, data in expected.items() if path not in withheld}
    for path, data in files.items():
        assert await served(web_service, path) == (200, data), path
    assert (await served(web_service, withheld.pop()))[0] == 403
    # After the reveal, the next pass publishes the bundle the port now serves.
    reveal = dealer_pb2.RevealRequest(request_id="reveal-published", round_id=round_id)
    await web_service.call("Reveal", reveal)
    report = await asyncio.to_thread(publish_once, store, DirectoryTarget(root))
    path = f"tile/entries/001.p/{report.size - 256}"
    assert report.paths_written[-1] == path
    assert await served(web_service, path) == (200, (root / path).read_bytes())
    assert (root / path).read_bytes() == expected_tiles(list(store.iter_entries(0)))[path]


@pytest.mark.system  # weed mini
async def test_a_live_log_is_byte_identical_on_disk_in_the_bucket_and_over_http(
    web_service: WebService, seaweed: Seaweed, tmp_path: Path
) -> None:
    store = web_service.app.store
    for _ in range(3):
        await web_service.play("table-2")
    bucket = seaweed.bucket()
    on_disk = await asyncio.to_thread(publish_once, store, DirectoryTarget(tmp_path / "tiles"))
    target = S3Target(bucket, "log", seaweed.client)
    in_bucket = await asyncio.to_thread(publish_once, store, target)
    assert on_disk.size == in_bucket.size
    files = files_under(tmp_path / "tiles")
    assert seaweed.objects(bucket, "log/") == files
    for path, data in files.items():
        assert await served(web_service, path) == (200, data), path
    # Every root from the tiles alone: the checkpoint's, recomputed from level-0 hashes.
    entries = list(store.iter_entries(0, on_disk.size))
    assert files == {"checkpoint": files["checkpoint"]} | {
        path: data for path, data in expected_tiles(entries).items() if path in files
    }
