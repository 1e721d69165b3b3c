"""A log's tiles written to a directory by a code path of their own (hashlib and the C2SP
tlog-tiles text, nothing of ``gnau_service.audit.tiles``), and tiles copied from a service's
HTTP port: inputs for the monitor's tests and benchmark that do not lean on the code they test."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

WIDTH = 256


def tile_name(level: int | str, index: int, width: int = WIDTH) -> str:
    """C2SP: the index in groups of three digits, all but the last prefixed with x; .p/W for a
    partial tile."""
    digits = str(index)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    name = "/".join([*("x" + group for group in groups[:-1]), groups[-1]])
    return f"tile/{level}/{name}" + ("" if width == WIDTH else f".p/{width}")


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _complete_root(hashes: Sequence[bytes]) -> bytes:
    """The Merkle root of a power-of-two count of hashes."""
    level = list(hashes)
    while len(level) > 1:
        level = [_node(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def leaf(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def write_tiles(
    directory: Path,
    entries: Sequence[bytes],
    sizes: Sequence[int],
    checkpoint: str | None,
    *,
    leaves: Sequence[bytes] | None = None,
) -> None:
    """Write every tile of every size in ``sizes`` (full tiles once, a partial tile for each
    size that ends inside one), every bundle, and ``checkpoint``."""
    hashes = list(leaves) if leaves is not None else [leaf(entry) for entry in entries]
    levels = [hashes]
    while len(levels[-1]) >= WIDTH:
        below = levels[-1]
        levels.append(
            [_complete_root(below[i : i + WIDTH]) for i in range(0, len(below) - WIDTH + 1, WIDTH)]
        )
    for size in sizes:
        for level, row in enumerate(levels):
            count = size // WIDTH**level
            for index in range(0, count, WIDTH):
                width = min(WIDTH, count - index)
                _write(
                    directory / tile_name(level, index // WIDTH, width),
                    b"".join(row[index : index + width]),
                )
        for index in range(0, size, WIDTH):
            width = min(WIDTH, size - index)
            bundle = b"".join(
                len(entry).to_bytes(2, "big") + entry for entry in entries[index : index + width]
            )
            _write(directory / tile_name("entries", index // WIDTH, width), bundle)
    if checkpoint is not None:
        (directory / "checkpoint").write_text(checkpoint, encoding="utf-8")


def _write(path: Path, data: bytes) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def copy_from_http(base: str, directory: Path, size: int) -> int:
    """Copy a served log's checkpoint and the tiles of a tree of ``size`` entries (each level's
    full tiles and partial tile; the bundles that are public) into ``directory``. How many
    bundles were not public."""
    withheld = 0

    def get(path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(base + path, timeout=10) as answer:
                data: bytes = answer.read()
                return data
        except urllib.error.HTTPError as error:
            if error.code in (403, 404):
                return None
            raise

    level = 0
    while size // WIDTH**level:
        count = size // WIDTH**level
        for index in range(0, count, WIDTH):
            name = tile_name(level, index // WIDTH, min(WIDTH, count - index))
            data = get(name)
            assert data is not None, name
            _write(directory / name, data)
        level += 1
    for index in range(0, size, WIDTH):
        name = tile_name("entries", index // WIDTH, min(WIDTH, size - index))
        data = get(name)
        if data is None:
            withheld += 1
        else:
            _write(directory / name, data)
    note = get("checkpoint")
    assert note is not None
    (directory / "checkpoint").write_bytes(note)
    return withheld
