"""Witnesses for tests: a real log to feed them, LOGS.toml files, and real ``gnau witness`` runs.

- :class:`GrowingLog`: an RFC 6962 tree (``MemoryTree``) whose checkpoints a real log key signs,
  with the consistency proofs between any two sizes; :meth:`GrowingLog.fork` makes a second log
  with the same key and origin but other leaves (a split view).
- :func:`write_logs_toml`: a LOGS.toml for some origins and keys.
- :func:`witness_process`: ``gnau witness serve`` as a subprocess on a free port, with a new key;
  yields a :class:`WitnessProcess` (URL, vkey) and requires a clean exit on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.merkle import MemoryTree, leaf_hash
from gnau_service.audit.note import SignedNote
from gnau_service.audit.signing import LogSigner
from gnau_service.audit.witness_protocol import encode_add_checkpoint

START_TIMEOUT = 30.0


class GrowingLog:
    """A log: leaves ``b"<label> <n>"``, checkpoints signed by ``signer``."""

    def __init__(self, signer: LogSigner, label: str = "leaf", size: int = 0) -> None:
        self.signer = signer
        self.label = label
        self.tree = MemoryTree()
        self.grow(size)

    @classmethod
    def new(cls, origin: str = "gnau-dealer/witness-test", size: int = 0) -> GrowingLog:
        return cls(LogSigner.from_private_key(origin, Ed25519PrivateKey.generate()), size=size)

    @property
    def origin(self) -> str:
        return self.signer.origin

    @property
    def vkey(self) -> str:
        return self.signer.vkey

    def grow(self, count: int) -> GrowingLog:
        for _ in range(count):
            self.tree.append(leaf_hash(f"{self.label} {self.tree.size}".encode()))
        return self

    def fork(self, at: int, label: str = "forked") -> GrowingLog:
        """A log with this one's key and first ``at`` leaves, growing other leaves after."""
        other = GrowingLog(self.signer, self.label)
        other.grow(at)
        other.label = label
        return other

    def checkpoint(self, size: int | None = None) -> SignedNote:
        size = self.tree.size if size is None else size
        return self.signer.sign_checkpoint(size, self.tree.root(size))

    def proof(self, old: int, new: int | None = None) -> list[bytes]:
        new = self.tree.size if new is None else new
        return [] if old in (0, new) else self.tree.consistency_proof(old, new)

    def request(self, old: int, new: int | None = None) -> bytes:
        """An add-checkpoint body from ``old`` to ``new`` (default: the whole tree), honest."""
        return encode_add_checkpoint(old, self.proof(old, new), self.checkpoint(new).encode())


def write_logs_toml(path: Path, logs: Mapping[str, Sequence[str]], prefix: str = "") -> Path:
    """A LOGS.toml following each origin with its vkeys."""
    lines = [f"prefix = {json.dumps(prefix)}", ""]
    for origin, keys in logs.items():
        lines += ["[[log]]", f"origin = {json.dumps(origin)}", f"keys = {json.dumps(list(keys))}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def post(url: str, body: bytes, timeout: float = 10.0) -> tuple[int, str, bytes]:
    """POST ``body``: (status, Content-Type, body), for any status."""
    request = urllib.request.Request(url, data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


@dataclass
class WitnessProcess:
    process: subprocess.Popen[str]
    url: str  # http://host:port<prefix>
    vkey: str
    key_path: Path
    database: str
    lines: list[str] = field(default_factory=list)

    @property
    def add_checkpoint_url(self) -> str:
        return self.url + "/add-checkpoint"

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=15)


def gnau(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gnau_service.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@contextmanager
def witness_process(
    directory: Path,
    logs_toml: Path,
    *,
    name: str = "witness.example/w1",
    prefix: str = "",
    key_path: Path | None = None,
) -> Iterator[WitnessProcess]:
    """``gnau witness serve`` on 127.0.0.1 and a free port; key and database in ``directory``
    (the key is created unless ``key_path`` exists). Must exit 0 on SIGTERM."""
    directory.mkdir(parents=True, exist_ok=True)
    key_path = key_path or directory / "witness.key"
    if not key_path.exists():
        made = gnau("witness", "keygen", "--name", name, "--key", str(key_path))
        assert made.returncode == 0, made.stderr
    database = f"sqlite:///{directory / 'witness.db'}"
    with open(directory / "witness.stderr", "w") as stderr:  # the child keeps its own copy
        process = subprocess.Popen(
            [
                sys.executable, "-m", "gnau_service.cli.main", "witness", "serve",
                "--listen", "127.0.0.1:0", "--key", str(key_path), "--logs", str(logs_toml),
                "--database", database, "--log-format", "console",
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith("vkey "):
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(START_TIMEOUT) or not any(line.startswith("vkey ") for line in lines):
        process.kill()
        stderr = (directory / "witness.stderr").read_text()
        raise AssertionError(f"witness did not start: {''.join(lines)}{stderr[-4000:]}")
    where = next(line for line in lines if " listening on " in line).split(" listening on ")[1]
    vkey = next(line for line in lines if line.startswith("vkey ")).split(" ", 1)[1].strip()
    witness = WitnessProcess(
        process, f"http://{where.split()[0]}{prefix}", vkey, key_path, database, lines
    )
    try:
        yield witness
    finally:
        status = witness.stop()
        assert status == 0, (directory / "witness.stderr").read_text()[-4000:]
