"""A service with witnesses, for tests: real ``gnau witness`` servers in this process (aiohttp on a
free port) following the service's log, and "down" witnesses: a key and a port nothing listens
on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from gnau_service.audit.cosignature import WitnessSigner
from gnau_service.audit.signing import LogSigner, ensure_private_key
from gnau_service.witness.logs import parse_logs
from gnau_service.witness.server import Clock, Witness, start_witness, utc_now
from gnau_service.witness.state import WitnessState
from tests.serving import free_port
from tests.witnessing import write_logs_toml


@dataclass(frozen=True)
class WitnessSpec:
    """A witness as ``gnau serve --witness`` names it."""

    url: str
    vkey: str

    @property
    def flag(self) -> str:
        return f"{self.url}={self.vkey}"

    @property
    def name(self) -> str:
        return self.vkey.split("+", 1)[0]


def log_vkey(data_dir: Path, origin: str) -> str:
    """The verifier key of the service that will start in ``data_dir`` (its key made now)."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = ensure_private_key(data_dir)
    return LogSigner.from_key_file(origin, key.path).vkey


def down_witness(name: str) -> WitnessSpec:
    """A witness whose port nothing listens on: every submission is refused a connection."""
    return WitnessSpec(f"http://127.0.0.1:{free_port()}", WitnessSigner.generate(name).vkey)


@asynccontextmanager
async def local_witness(
    directory: Path, name: str, origin: str, log_key: str, *, clock: Clock = utc_now
) -> AsyncIterator[WitnessSpec]:
    """A witness server in this process, following the log ``origin`` signed by ``log_key``,
    cosigning at the times ``clock`` tells."""
    directory.mkdir(parents=True, exist_ok=True)
    signer = WitnessSigner.generate(name)
    logs = parse_logs(write_logs_toml(directory / "logs.toml", {origin: [log_key]}).read_text())
    state = WitnessState(directory / "witness.db")
    running = await start_witness(Witness(signer, logs, state, clock), "127.0.0.1", 0)
    host, port = running.addresses[0]
    try:
        yield WitnessSpec(f"http://{host}:{port}", signer.vkey)
    finally:
        await running.stop()
        state.close()


async def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Wait until ``condition()`` holds (it is polled), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)
