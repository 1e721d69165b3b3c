"""The Go checksum database's reference tile code reads this log: ``go_tiles/main.go`` uses
golang.org/x/mod/sumdb/note and .../tlog (Debian: golang-golang-x-mod-dev), built offline in
GOPATH mode as examples/go-table-service is, against a live service's ``/log/`` tiles. It
verifies the checkpoint, recomputes its root through ``tlog.TileHashReader``, proves every
entry of every bundle included and the tree consistent with smaller sizes.

Without Go or x/mod the test is skipped, except in CI (``CI`` set), where it fails."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.note import SignedNote
from gnau_service.server.process.app import running
from tests.node.test_node_client import in_ci
from tests.web.conftest import WebService, web_settings

pytestmark = [pytest.mark.system, pytest.mark.asyncio(loop_scope="module")]

SOURCE = Path(__file__).resolve().parent / "go_tiles" / "main.go"
GOPATH = Path("/usr/share/gocode")
X_MOD = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb" / "tlog"
#: Rounds to play: four entries or more each, so the log passes 256 entries (a full tile).
ROUNDS = 70


def go_or_skip() -> str:
    go = shutil.which("go")
    if go is not None and X_MOD.is_dir():
        return go
    reason = "go and golang-golang-x-mod-dev are needed to read the tiles with Go's tlog"
    if in_ci():
        pytest.fail(f"{reason}; CI must run it", pytrace=False)
    pytest.skip(reason)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def service(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[WebService]:
    async with (
        running(web_settings(tmp_path_factory.mktemp("go-tiles"))) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield WebService(app, channel)


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = go_or_skip()
    build = tmp_path_factory.mktemp("go-tiles")
    shutil.copy(SOURCE, build / "main.go")
    environment = os.environ | {
        "GO111MODULE": "off",
        "GOPATH": str(GOPATH),
        "GOCACHE": str(build / "cache"),
        "GOFLAGS": "",
    }
    built = subprocess.run(
        [go, "build", "-o", str(build / "go_tiles"), "."],
        cwd=build, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return build / "go_tiles"


async def test_go_s_tlog_reads_the_log_through_its_tiles(service: WebService, binary: Path) -> None:
    for _ in range(ROUNDS):
        await service.play()
    base = f"{service.base_url}log/"
    ran = await asyncio.to_thread(
        subprocess.run,
        [str(binary), base, service.vkey],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    word, size, root = ran.stdout.split()
    assert word == "ok"
    checkpoint = service.app.store.checkpoint(int(size))
    assert checkpoint is not None
    parsed = Checkpoint.parse(SignedNote.parse(checkpoint).text)
    assert int(size) > 256
    assert base64.b64decode(root) == parsed.root_hash


async def test_go_s_tlog_refuses_a_checkpoint_of_another_key(
    service: WebService, binary: Path
) -> None:
    other = "gnau-dealer/other+d7d1b9c6+AQ" + base64.b64encode(bytes(32)).decode()
    ran = await asyncio.to_thread(
        subprocess.run,
        [str(binary), f"{service.base_url}log/", other],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 1
    assert "checkpoint" in ran.stderr or "vkey" in ran.stderr
