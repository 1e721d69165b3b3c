"""The tiles client: found, not found, not yet public, and the size limits, over HTTP and from a
directory."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gnau_service.audit.tiles import TileRef
from gnau_service.tiles.client import (
    TileClient,
    TileFetchError,
    TileNotFound,
    TileNotPublic,
    open_tiles,
)

#: What the test server answers, by path: a status and a body.
ANSWERS = {
    "/log/checkpoint": (200, b"a note\n"),
    "/log/tile/0/000.p/2": (200, bytes(64)),
    "/log/tile/0/001": (200, bytes(8193)),
    "/log/tile/entries/000.p/2": (403, b"not yet public"),
    "/log/tile/entries/001": (500, b"broken"),
}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, body = ANSWERS.get(self.path, (404, b"no such tile"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served() -> Iterator[TileClient]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield open_tiles(f"http://127.0.0.1:{server.server_address[1]}/log", timeout=5)
    server.shutdown()


def test_http_answers(served: TileClient) -> None:
    assert served.checkpoint() == b"a note\n"
    assert served.hashes(TileRef(0, 0, 2)) == [bytes(32), bytes(32)]
    with pytest.raises(TileNotPublic):
        served.bundle(TileRef(None, 0, 2))
    with pytest.raises(TileNotFound):
        served.tile(TileRef(0, 2))
    with pytest.raises(TileFetchError, match="more than 8,192 bytes"):
        served.tile(TileRef(0, 1))
    with pytest.raises(TileFetchError, match="HTTP 500"):
        served.tile(TileRef(None, 1))


def test_a_directory(tmp_path: Path) -> None:
    (tmp_path / "tile/0").mkdir(parents=True)
    (tmp_path / "tile/0/000").write_bytes(bytes(range(32)) * 256)
    (tmp_path / "tile/0/001").write_bytes(bytes(8193))
    client = open_tiles(str(tmp_path))
    with pytest.raises(TileNotFound):
        client.checkpoint()
    # A partial tile gone: read from the full tile that replaced it.
    assert client.hashes(TileRef(0, 0, 3)) == [bytes(range(32))] * 3
    with pytest.raises(TileFetchError, match="more than 8,192 bytes"):
        client.tile(TileRef(0, 1))
    with pytest.raises(TileNotFound):
        client.bundle(TileRef(None, 0))
