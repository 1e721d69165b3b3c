"""Reading a log's tiles (C2SP tlog-tiles, :mod:`gnau_service.audit.tiles`) from where they are
published: an ``http(s)://`` URL (the service's ``/log/`` or a bucket's endpoint) or a local
directory (a bucket's copy).

Every read is bounded: a timeout, and a size limit per kind of file (a hash tile is at most
8,192 bytes, a bundle at most 256 entries of 65,535 bytes with their lengths, a checkpoint at
most 1 MiB), so a hostile publisher cannot make a reader wait or hold memory without end. A read
ends one of three ways: the bytes; :class:`TileNotFound` (HTTP 404, or no such file);
:class:`TileNotPublic` (HTTP 403: a bundle whose rounds are not revealed yet). Anything else
(another status, a broken connection, a file over its limit) is :class:`TileFetchError`.

>>> limit_of(TileRef(0, 5)), limit_of(TileRef(None, 5)), CHECKPOINT_LIMIT
(8192, 16777472, 1048576)
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Protocol

from gnau_service.audit.merkle import HASH_SIZE
from gnau_service.audit.tiles import TILE_WIDTH, TileError, TileRef, decode_bundle, split_hashes

#: The most bytes a checkpoint (with its witnesses' cosignature lines) may have.
CHECKPOINT_LIMIT: Final = 1 << 20
#: The most bytes a hash tile has: 256 hashes.
HASH_TILE_LIMIT: Final = TILE_WIDTH * HASH_SIZE
#: The most bytes a bundle can have: 256 entries, each a uint16 length and at most 65,535 bytes.
BUNDLE_LIMIT: Final = TILE_WIDTH * (2 + 0xFFFF)
#: Seconds a request may take, connecting and reading.
DEFAULT_TIMEOUT: Final = 30.0
CHECKPOINT: Final = "checkpoint"


class TileFetchError(OSError):
    """A tile could not be read: a connection or file error, an unexpected status, or more
    bytes than such a file may have."""


class TileNotFound(LookupError):  # noqa: N818  (a condition, not a fault)
    """No such file: HTTP 404, or absent from the directory."""


class TileNotPublic(LookupError):  # noqa: N818
    """HTTP 403: the file exists but is not public yet (a bundle of unrevealed rounds)."""


def limit_of(ref: TileRef) -> int:
    """The most bytes the tile ``ref`` may have."""
    return BUNDLE_LIMIT if ref.level is None else HASH_TILE_LIMIT


class TileReader(Protocol):
    """Reads one file of a log's tiles, by its path under the log's prefix."""

    #: Where the tiles are read from, for messages.
    base: str

    def read(self, path: str, limit: int) -> bytes: ...


class HttpTiles:
    """Tiles over HTTP(S): ``base`` is the log's prefix (``https://host/log/``)."""

    def __init__(self, base: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.base = base if base.endswith("/") else base + "/"
        self.timeout = timeout

    def read(self, path: str, limit: int) -> bytes:
        url = urllib.parse.urljoin(self.base, path)
        request = urllib.request.Request(  # noqa: S310  (the scheme is http or https: open_tiles)
            url, headers={"User-Agent": "gnau-tiles-client"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310
                data: bytes = answer.read(limit + 1)
        except urllib.error.HTTPError as error:
            error.close()
            if error.code == 404:
                raise TileNotFound(f"{url}: 404 not found") from None
            if error.code == 403:
                raise TileNotPublic(f"{url}: 403 not yet public") from None
            raise TileFetchError(f"{url}: HTTP {error.code} {error.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise TileFetchError(f"{url}: {error}") from None
        if len(data) > limit:
            raise TileFetchError(f"{url}: more than {limit:,} bytes, the most such a file has")
        return data


class DirectoryTiles:
    """Tiles in a directory, as ``gnau tiles publish`` writes them (a file absent is not found;
    a directory cannot say "not yet public", so an absent bundle is one the publisher held back)."""

    def __init__(self, base: str | Path) -> None:
        self.root = Path(base)
        self.base = str(base)

    def read(self, path: str, limit: int) -> bytes:
        target = self.root / path
        try:
            with target.open("rb") as file:
                data = file.read(limit + 1)
        except (FileNotFoundError, NotADirectoryError):
            raise TileNotFound(f"{target}: absent") from None
        except OSError as error:
            raise TileFetchError(f"{target}: {error}") from None
        if len(data) > limit:
            raise TileFetchError(f"{target}: more than {limit:,} bytes, the most such a file has")
        return data


def is_tiles_location(text: str) -> bool:
    """Whether ``text`` names tiles: an http(s) URL, or a directory holding a checkpoint."""
    if text.startswith(("http://", "https://")):
        return True
    return (Path(text) / CHECKPOINT).is_file()


def open_tiles(base: str, timeout: float = DEFAULT_TIMEOUT) -> TileClient:
    """A client for the tiles at ``base``: an http(s) URL or a directory."""
    if base.startswith(("http://", "https://")):
        return TileClient(HttpTiles(base, timeout))
    return TileClient(DirectoryTiles(base))


class TileClient:
    """The log's files, read through a :class:`TileReader` and checked for their form."""

    def __init__(self, reader: TileReader) -> None:
        self.reader = reader
        #: Files read, and their bytes: for progress and benchmarks.
        self.reads = 0
        self.bytes_read = 0

    @property
    def base(self) -> str:
        return self.reader.base

    def _read(self, path: str, limit: int) -> bytes:
        data = self.reader.read(path, limit)
        self.reads += 1
        self.bytes_read += len(data)
        return data

    def checkpoint(self) -> bytes:
        """The latest checkpoint's bytes, as served (:class:`TileNotFound` if there is none)."""
        return self._read(CHECKPOINT, CHECKPOINT_LIMIT)

    def tile(self, ref: TileRef) -> bytes:
        """One tile's bytes."""
        return self._read(str(ref), limit_of(ref))

    def hashes(self, ref: TileRef) -> Sequence[bytes]:
        """The hashes of a hash tile. A partial tile that is gone is read from the full tile that
        replaced it (C2SP lets a publisher drop partial tiles once the full one exists): its first
        ``width`` hashes are the partial tile's. Raises
        :class:`~gnau_service.audit.tiles.TileError` for bytes that are not ``width`` hashes."""
        try:
            return _hashes_of(ref, self.tile(ref))
        except TileNotFound:
            if ref.full:
                raise
        full = TileRef(ref.level, ref.index)
        try:
            hashes = _hashes_of(full, self.tile(full))
        except TileNotFound:
            raise TileNotFound(f"{self.base}: neither {ref} nor {full} is there") from None
        return hashes[: ref.width]

    def bundle(self, ref: TileRef) -> list[bytes]:
        """The entries of a bundle (a partial one gone: the full bundle's first entries).
        Raises :class:`TileNotPublic` or :class:`TileNotFound` for one not (yet) there."""
        try:
            return decode_bundle(self.tile(ref), ref.width)
        except TileNotFound:
            if ref.full:
                raise
        full = TileRef(None, ref.index)
        try:
            entries = decode_bundle(self.tile(full), TILE_WIDTH)
        except TileNotFound:
            raise TileNotFound(f"{self.base}: neither {ref} nor {full} is there") from None
        return entries[: ref.width]


def _hashes_of(ref: TileRef, data: bytes) -> list[bytes]:
    try:
        return split_hashes(data, ref.width)
    except TileError as error:
        raise TileError(f"{ref}: {error}") from None
