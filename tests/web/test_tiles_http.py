"""The log's tiles on the HTTP port (``/log/``): C2SP tlog-tiles, rendered from the store."""

from __future__ import annotations

import asyncio
import hashlib
import uuid

import aiohttp
import pytest
from gnau.v1 import dealer_pb2

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.note import SignedNote
from tests.web.conftest import WebService

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_hash_tiles_and_bundles_follow_a_checkpoint(web_service: WebService) -> None:
    await web_service.play()
    status, headers, body = await web_service.log("checkpoint")
    assert status == 200
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["Cache-Control"] == "public, max-age=2"
    size = Checkpoint.parse(SignedNote.parse(body.decode()).text).size
    assert 0 < size < 256
    status, headers, tile = await web_service.log(f"tile/0/000.p/{size}")
    assert status == 200
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Cache-Control"] == "public, max-age=604800, immutable"
    assert len(tile) == 32 * size
    status, _, bundle = await web_service.log(f"tile/entries/000.p/{size}")
    assert status == 200
    # Each entry is a uint16 length and its bytes, and its leaf hash is the tile's.
    offset = 0
    for i in range(size):
        length = int.from_bytes(bundle[offset : offset + 2], "big")
        entry = bundle[offset + 2 : offset + 2 + length]
        assert hashlib.sha256(b"\0" + entry).digest() == tile[32 * i : 32 * i + 32]
        offset += 2 + length
    assert offset == len(bundle)


async def test_a_tile_no_checkpoint_covers_is_not_found(web_service: WebService) -> None:
    await web_service.play()
    _, _, body = await web_service.log("checkpoint")
    size = Checkpoint.parse(SignedNote.parse(body.decode()).text).size
    for path in (f"tile/0/000.p/{size + 1}", "tile/0/000", "tile/1/000.p/1", "tile/entries/001"):
        status, headers, answer = await web_service.log(path)
        assert (status, headers["Cache-Control"]) == (404, "no-store"), path
        assert b"NOT_FOUND" in answer


@pytest.mark.parametrize(
    "path",
    [
        "tile/0/0",
        "tile/0/000.p/0",
        "tile/0/000.p/256",
        "tile/0/000.p/007",
        "tile/8/000",
        "tile/0/x000/001",
        "tile/data/000",
        "tile/0/001/002",
        "tile/0/000.p",
    ],
)
async def test_a_path_that_is_not_a_tile_is_not_found(web_service: WebService, path: str) -> None:
    status, _, body = await web_service.log(path)
    assert status == 404
    assert b"not a tile" in body


async def test_a_bundle_is_public_once_every_round_in_it_is_revealed(
    web_service: WebService,
) -> None:
    round_id = await web_service.play(until="Deal")
    _, _, body = await web_service.log("checkpoint")
    size = Checkpoint.parse(SignedNote.parse(body.decode()).text).size
    status, headers, answer = await web_service.log(f"tile/entries/000.p/{size}")
    assert (status, headers["Cache-Control"]) == (403, "no-store")
    assert b"not yet revealed" in answer
    assert round_id.encode() not in answer
    # The hash tile of the same leaves is public: hashes say nothing of the hands.
    assert (await web_service.log(f"tile/0/000.p/{size}"))[0] == 200
    reveal = dealer_pb2.RevealRequest(request_id=str(uuid.uuid4()), round_id=round_id)
    await web_service.call("Reveal", reveal)
    assert (await web_service.log(f"tile/entries/000.p/{size}"))[0] == 200


async def test_callers_of_the_checkpoint_at_once_each_get_it(web_service: WebService) -> None:
    await web_service.play("table-2")
    # An event-loop client: the service runs in this process, and blocking GETs on worker
    # threads would hold the very threads its reads need.
    url = f"{web_service.base_url}log/checkpoint"
    async with aiohttp.ClientSession() as session:

        async def get() -> tuple[int, bytes]:
            async with session.get(url) as answer:
                return answer.status, await answer.read()

        answers = await asyncio.gather(*(get() for _ in range(24)))
    assert {status for status, _ in answers} == {200}
    expected = web_service.app.store.checkpoint()
    assert expected is not None
    # They share reads in flight; nothing is logged meanwhile, so each gets the latest, whole.
    for _, body in answers:
        size = Checkpoint.parse(SignedNote.parse(body.decode()).text).size
        assert size == Checkpoint.parse(SignedNote.parse(expected).text).size
